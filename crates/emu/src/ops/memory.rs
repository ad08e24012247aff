//! Loads and stores (PTX ISA 9.7.9.8 `ld`, 9.7.9.10 `st`) on the shared and global state
//! spaces, checked for bounds, alignment and the asynchronous-ownership rules.

use super::exec;
use crate::memory::{Pod, UnfencedWrite};
use crate::race::Kind;
use crate::report::ErrorKind;

/// `ld.shared.T`: a generic-proxy read. Fails if an asynchronous copy still owns a byte
/// (the data would be stale) or if the bytes hold an mbarrier object.
#[track_caller]
pub fn ld_shared<T: Pod>(addr: u32) -> T {
    let size = size_of::<T>() as u32;
    let ex = exec("ld.shared");
    let r = ex.st.smem.index(addr, size, size.min(16));
    let (ex, i) = ex.check(r);
    let n = size as usize;
    if let Some(b) = (i..i + n).find(|&b| ex.st.smem.async_writers[b] > 0) {
        let a = ex.st.smem.base + b as u32;
        ex.fail(
            ErrorKind::AsyncOwned,
            format!("reads shared byte {a:#x} while an asynchronous copy into it is still pending (missing wait?)"),
        );
    }
    if ex.st.smem.mbarrier_bytes[i..i + n].iter().any(|&m| m) {
        ex.fail(ErrorKind::Mbarrier, format!("generic load of {addr:#x} reads an mbarrier object"));
    }
    let ex = ex.shared_access(i, n, Kind::Read);
    // SAFETY: `index` checked the range; T accepts any bit pattern.
    unsafe { std::ptr::read_unaligned(ex.st.smem.bytes[i..].as_ptr() as *const T) }
}

/// `st.shared.T`: a generic-proxy write. Fails if an asynchronous copy owns a byte, if
/// an in-flight wgmma or tcgen05.mma/cp will still read it, or if it would overwrite an mbarrier; the
/// bytes are remembered as unfenced until this thread's `fence.proxy.async`.
#[track_caller]
pub fn st_shared<T: Pod>(addr: u32, value: T) {
    let size = size_of::<T>() as u32;
    let ex = exec("st.shared");
    let r = ex.st.smem.index(addr, size, size.min(16));
    let (ex, i) = ex.check(r);
    let n = size as usize;
    if let Some(b) = (i..i + n).find(|&b| ex.st.smem.async_writers[b] > 0) {
        let a = ex.st.smem.base + b as u32;
        ex.fail(
            ErrorKind::AsyncOwned,
            format!("writes shared byte {a:#x} while an asynchronous copy into it is still pending"),
        );
    }
    if let Some(b) = (i..i + n).find(|&b| ex.st.smem.async_readers[b] > 0) {
        let a = ex.st.smem.base + b as u32;
        ex.fail(
            ErrorKind::InFlightRead,
            format!(
                "overwrites shared byte {a:#x}, which an in-flight async-proxy reader still reads (a wgmma: missing \
                 wgmma.wait_group?; a tcgen05.mma/cp: missing wait on its tcgen05.commit mbarrier?)"
            ),
        );
    }
    if ex.st.smem.mbarrier_bytes[i..i + n].iter().any(|&m| m) {
        ex.fail(ErrorKind::Mbarrier, format!("generic store to {addr:#x} overwrites an mbarrier object"));
    }
    let mut ex = ex.shared_access(i, n, Kind::Write);
    // SAFETY: as in `ld_shared`.
    unsafe { std::ptr::write_unaligned(ex.st.smem.bytes[i..].as_mut_ptr() as *mut T, value) };
    let me = ex.me as usize;
    let (loc, smem) = (ex.loc, &mut ex.st.smem);
    smem.unfenced_by[i..i + n].iter_mut().for_each(|b| *b = me as u32 + 1);
    smem.unfenced[me].push(UnfencedWrite { start: addr, len: size, loc });
}

/// The host pointer of a `size`-byte global access at `addr`, after the bounds and
/// natural-alignment checks (the CTA lock is released: global memory is not CTA state).
#[track_caller]
fn global_access(instruction: &'static str, addr: u64, size: usize) -> *mut u8 {
    let ex = exec(instruction);
    let ptr = match ex.cta.global.resolve(addr, size) {
        Ok(p) => p,
        Err(m) => ex.fail(ErrorKind::OutOfBounds, m),
    };
    if !addr.is_multiple_of(size.min(16) as u64) {
        ex.fail(ErrorKind::OutOfBounds, format!("global address {addr:#x} is not {size}-byte aligned"));
    }
    ptr
}

/// `ld.global.T` (also the `.nc` read-only form: same semantics here).
#[track_caller]
pub fn ld_global<T: Pod>(addr: u64) -> T {
    let ptr = global_access("ld.global", addr, size_of::<T>());
    // SAFETY: `global_access` checked the range lies in a live allocation.
    unsafe { std::ptr::read_unaligned(ptr as *const T) }
}

/// `st.global.T`.
#[track_caller]
pub fn st_global<T: Pod>(addr: u64, value: T) {
    let ptr = global_access("st.global", addr, size_of::<T>());
    // SAFETY: as in `ld_global`.
    unsafe { std::ptr::write_unaligned(ptr as *mut T, value) };
}

/// `atom.global.add.u32`: an atomic read-modify-write, atomic also between CTAs that run at
/// the same time on different host threads. Returns the old value.
#[track_caller]
pub fn atom_add_global_u32(addr: u64, v: u32) -> u32 {
    let ptr = global_access("atom.global.add.u32", addr, 4);
    // SAFETY: `global_access` checked the 4 bytes lie in a live allocation and are 4-byte
    // aligned; every access to them during a launch that races with this one is atomic
    // or a kernel bug.
    let atomic = unsafe { std::sync::atomic::AtomicU32::from_ptr(ptr as *mut u32) };
    atomic.fetch_add(v, std::sync::atomic::Ordering::SeqCst)
}
