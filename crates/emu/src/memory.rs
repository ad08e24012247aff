//! Emulated memories.
//!
//! Global memory is a set of host allocations whose addresses are their real host
//! addresses, so a kernel's pointer arithmetic works unchanged; every access is checked
//! against the allocation it falls in. Shared memory is a per-CTA byte array addressed
//! by 32-bit shared-window addresses, with the bookkeeping the strict rules need: which
//! bytes an asynchronous copy still owns, which an in-flight tensor-core read will read,
//! and which were written through the generic proxy and not yet fenced.

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::report::{ErrorKind, Loc};

/// Plain-old-data values a kernel may load and store: any bit pattern is valid.
///
/// # Safety
/// Implementors must be `Copy`, have no padding and accept every bit pattern.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}
macro_rules! pod {
    ($($t:ty),*) => { $(unsafe impl Pod for $t {})* };
}
pod!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, [u32; 2], [u32; 4], [u64; 2]);

/// Alignment of every allocation, as `cudaMalloc` guarantees.
pub const ALLOCATION_ALIGNMENT: usize = 256;

/// Byte pattern of freshly allocated global memory: `cudaMalloc` gives no guarantee,
/// so the emulator gives something that is never a plausible result.
pub const UNINITIALISED_BYTE: u8 = 0xA5;

struct Allocation {
    name: String,
    ptr: *mut u8,
    /// Bytes a kernel may touch.
    len: usize,
    /// Bytes actually allocated (at least 1, so every allocation has its own address).
    capacity: usize,
}

// The raw pointer is owned by the allocation; access is coordinated by the kernel (as on
// a GPU, racy writes are the kernel's bug) and by `&mut GlobalMemory` outside launches.
unsafe impl Send for Allocation {}
unsafe impl Sync for Allocation {}

impl Drop for Allocation {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.capacity, ALLOCATION_ALIGNMENT).expect("allocation size");
        // SAFETY: `ptr` was allocated in `GlobalMemory::alloc` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

/// The emulated device's global memory: named allocations at their host addresses.
#[derive(Default)]
pub struct GlobalMemory {
    allocations: RwLock<BTreeMap<u64, Allocation>>,
}

impl std::fmt::Debug for GlobalMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let map = self.allocations.read().unwrap_or_else(|e| e.into_inner());
        let mut list = f.debug_list();
        for (addr, a) in map.iter() {
            list.entry(&format_args!("{}: {:#x} + {}", a.name, addr, a.len));
        }
        list.finish()
    }
}

impl GlobalMemory {
    pub fn new() -> GlobalMemory {
        GlobalMemory::default()
    }

    /// Allocates `len` bytes (filled with [`UNINITIALISED_BYTE`]) and returns the device
    /// address kernels use. `name` appears in out-of-bounds reports.
    pub fn alloc(&self, name: &str, len: usize) -> u64 {
        let capacity = len.max(1);
        let layout = std::alloc::Layout::from_size_align(capacity, ALLOCATION_ALIGNMENT).expect("allocation size");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `ptr` points to `capacity` freshly allocated bytes.
        unsafe { std::ptr::write_bytes(ptr, UNINITIALISED_BYTE, capacity) };
        let addr = ptr as u64;
        let mut map = self.allocations.write().unwrap_or_else(|e| e.into_inner());
        map.insert(addr, Allocation { name: name.to_string(), ptr, len, capacity });
        addr
    }

    /// Allocates and fills with `data`.
    pub fn alloc_from(&self, name: &str, data: &[u8]) -> u64 {
        let addr = self.alloc(name, data.len());
        self.write(addr, data).expect("fresh allocation holds its data");
        addr
    }

    /// Frees the allocation that starts at `addr`.
    pub fn free(&self, addr: u64) -> Result<(), String> {
        let mut map = self.allocations.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&addr).map(|_| ()).ok_or_else(|| format!("no allocation starts at {addr:#x}"))
    }

    /// Copies host bytes into device memory (`cudaMemcpy` host-to-device).
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        let ptr = self.resolve(addr, data.len())?;
        // SAFETY: `resolve` checked the range lies inside one live allocation.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
        Ok(())
    }

    /// Copies device bytes to the host (`cudaMemcpy` device-to-host).
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        let ptr = self.resolve(addr, out.len())?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Fills device bytes with `value` (`cudaMemset`).
    pub fn fill(&self, addr: u64, len: usize, value: u8) -> Result<(), String> {
        let ptr = self.resolve(addr, len)?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::write_bytes(ptr, value, len) };
        Ok(())
    }

    /// The host pointer for `[addr, addr + len)` if it lies inside one allocation.
    pub(crate) fn resolve(&self, addr: u64, len: usize) -> Result<*mut u8, String> {
        let map = self.allocations.read().unwrap_or_else(|e| e.into_inner());
        if let Some((&start, a)) = map.range(..=addr).next_back() {
            let end = start + a.len as u64;
            // `range(..=addr)` found the last allocation starting at or before `addr`.
            if addr.checked_add(len as u64).is_some_and(|e| e <= end) {
                return Ok(a.ptr.wrapping_add((addr - start) as usize));
            }
            // Starts inside it (or at its start, for an empty one) but runs past its end.
            if addr < end || addr == start {
                return Err(format!(
                    "{len} bytes at {addr:#x} run past the end of `{}` ({} bytes at {start:#x}) by {} bytes",
                    a.name,
                    a.len,
                    addr + len as u64 - end
                ));
            }
        }
        Err(format!("{len} bytes at {addr:#x} are in no global allocation"))
    }
}

/// One generic-proxy write that its thread has not yet fenced for the async proxy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UnfencedWrite {
    pub start: u32,
    pub len: u32,
    pub loc: Loc,
}

/// A CTA's shared memory with the bookkeeping of the strict rules.
pub(crate) struct SharedMemory {
    /// Shared-window address of the first byte of `bytes` (the dynamic base).
    pub base: u32,
    pub bytes: Vec<u8>,
    /// Per byte: how many pending asynchronous copies will write it.
    pub async_writers: Vec<u8>,
    /// Per byte: how many in-flight async-proxy readers (wgmma, tcgen05.mma/cp) will read it.
    pub async_readers: Vec<u8>,
    /// Per byte: 1 + the thread whose generic write is not yet proxy-fenced, or 0.
    pub unfenced_by: Vec<u32>,
    /// Per thread: its unfenced writes, cleared by its `fence.proxy.async`.
    pub unfenced: Vec<Vec<UnfencedWrite>>,
    /// Per byte: whether an mbarrier object lives there.
    pub mbarrier_bytes: Vec<bool>,
}

/// Fill of shared memory at launch: real shared memory starts with stale contents.
pub const SHARED_INITIAL_BYTE: u8 = 0x5A;

impl SharedMemory {
    pub fn new(base: u32, len: u32, threads: usize) -> SharedMemory {
        let len = len as usize;
        SharedMemory {
            base,
            bytes: vec![SHARED_INITIAL_BYTE; len],
            async_writers: vec![0; len],
            async_readers: vec![0; len],
            unfenced_by: vec![0; len],
            unfenced: vec![Vec::new(); threads],
            mbarrier_bytes: vec![false; len],
        }
    }

    /// Index of `[addr, addr + len)` in `bytes`, checking bounds and alignment.
    pub fn index(&self, addr: u32, len: u32, align: u32) -> Result<usize, (ErrorKind, String)> {
        let end = self.base as u64 + self.bytes.len() as u64;
        if (addr as u64) < self.base as u64 || addr as u64 + len as u64 > end {
            return Err((
                ErrorKind::OutOfBounds,
                format!(
                    "{len} bytes at shared address {addr:#x} are outside the CTA's shared memory [{:#x}, {end:#x})",
                    self.base
                ),
            ));
        }
        if align > 1 && !addr.is_multiple_of(align) {
            return Err((ErrorKind::OutOfBounds, format!("shared address {addr:#x} is not {align}-byte aligned")));
        }
        Ok((addr - self.base) as usize)
    }

    /// Marks `[i, i + len)` (indices into `bytes`) as owned by a pending asynchronous copy,
    /// refusing bytes an in-flight wgmma or tcgen05 operation still reads.
    pub fn claim_for_async_write(&mut self, i: usize, len: usize) -> Result<(), (ErrorKind, String)> {
        if let Some(b) = (i..i + len).find(|&b| self.mbarrier_bytes[b]) {
            let a = self.base + b as u32;
            return Err((
                ErrorKind::Mbarrier,
                format!("copies into shared byte {a:#x}, which holds an mbarrier object"),
            ));
        }
        if let Some(b) = (i..i + len).find(|&b| self.async_readers[b] > 0) {
            let a = self.base + b as u32;
            return Err((
                ErrorKind::InFlightRead,
                format!("copies into shared byte {a:#x}, which an in-flight wgmma or tcgen05.mma/cp still reads"),
            ));
        }
        self.async_writers[i..i + len].iter_mut().for_each(|b| *b += 1);
        Ok(())
    }

    /// Checks that the async proxy may read `[addr, addr + len)` now (the range is in
    /// bounds): no asynchronous copy still owns a byte, and every generic write to it was
    /// fenced for the async proxy by its writer. `reader` names the reading operation, e.g.
    /// "the wgmma issued at f.rs:12" (built only for a report).
    pub fn check_async_read(
        &self,
        addr: u32,
        len: u32,
        reader: impl Fn() -> String,
    ) -> Result<(), (ErrorKind, String)> {
        let i = (addr - self.base) as usize;
        for b in i..i + len as usize {
            let a = self.base + b as u32;
            if self.async_writers[b] > 0 {
                return Err((
                    ErrorKind::AsyncOwned,
                    format!(
                        "{} reads shared byte {a:#x} while an asynchronous copy into it is still pending",
                        reader()
                    ),
                ));
            }
            if self.unfenced_by[b] != 0 {
                let writer = self.unfenced_by[b] - 1;
                let at = self.unfenced[writer as usize]
                    .iter()
                    .rev()
                    .find(|w| a >= w.start && a < w.start + w.len)
                    .map(|w| format!(" at {}:{}", w.loc.file(), w.loc.line()))
                    .unwrap_or_default();
                return Err((
                    ErrorKind::MissingProxyFence,
                    format!(
                        "{} reads shared byte {a:#x}, written by thread {writer}{at} through the generic proxy \
                         with no fence.proxy.async in that thread before the read was issued",
                        reader()
                    ),
                ));
            }
        }
        Ok(())
    }
}
