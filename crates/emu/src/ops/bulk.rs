//! Bulk asynchronous copies through the async proxy (PTX ISA 9.7.9.25.4):
//! `cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes` (1-D) and
//! `cp.async.bulk.tensor.Nd.shared::cta.global.tile.mbarrier::complete_tx::bytes`.
//!
//! Both write shared memory through the async proxy and signal `complete_tx` with the
//! bytes delivered on an mbarrier. Under emulation the data lands only when no thread can
//! run without it (the latest moment the rules allow); until then the destination bytes
//! belong to the copy. A tensor copy always delivers the whole box: elements outside the
//! tensor are filled, and they count toward the transaction bytes.

use super::exec;
use crate::cta::{Cta, CtaState};
use crate::model::tensor_map::TensorMap;
use crate::report::{EmuError, ErrorKind, Loc};

/// Bytes of the opaque tensor-map object (`CUtensorMap`).
pub const TENSOR_MAP_BYTES: usize = 128;

#[derive(Clone, Debug)]
pub(crate) enum Source {
    Linear { src: u64 },
    Tensor { map: Box<TensorMap>, coords: Vec<i32> },
}

#[derive(Clone, Debug)]
pub(crate) struct BulkCopy {
    pub sequence: u64,
    pub source: Source,
    pub dst: u32,
    pub bytes: u32,
    pub mbarrier: u32,
    pub thread: u32,
    pub loc: Loc,
}

fn enqueue(mut ex: super::Exec, source: Source, dst: u32, bytes: u32, mbar: u32) {
    let (ex2, ()) = super::mbarrier::lookup(ex, mbar);
    ex = ex2;
    let r = ex.st.smem.index(dst, bytes, 16);
    let (mut ex, i) = ex.check(r);
    let r = ex.st.smem.claim_for_async_write(i, bytes as usize);
    let (ex, ()) = ex.check(r);
    let mut ex = ex.async_write_issue(i, bytes as usize, crate::race::Kind::Bulk);
    let sequence = ex.st.next_sequence();
    let (thread, loc) = (ex.me, ex.loc);
    ex.st.bulk.push_back(BulkCopy { sequence, source, dst, bytes, mbarrier: mbar, thread, loc });
}

/// `cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar];`
/// `size`, `dst` and `src` must be multiples of 16.
#[track_caller]
pub fn global_to_shared(dst: u32, src: u64, size: u32, mbar: u32) {
    let ex = exec("cp.async.bulk.shared::cta.global");
    if size == 0 || !size.is_multiple_of(16) {
        ex.fail(ErrorKind::OutOfBounds, format!("bulk copy size {size} is not a positive multiple of 16"));
    }
    if !src.is_multiple_of(16) {
        ex.fail(ErrorKind::OutOfBounds, format!("bulk copy source {src:#x} is not 16-byte aligned"));
    }
    if let Err(m) = ex.cta.global.resolve(src, size as usize) {
        ex.fail(ErrorKind::OutOfBounds, m);
    }
    enqueue(ex, Source::Linear { src }, dst, size, mbar);
}

/// `cp.async.bulk.tensor.{1..5}d.shared::cta.global.tile.mbarrier::complete_tx::bytes
/// [dst], [tensor_map, {coords}], [mbar];` — `tensor_map` is the address of the 128-byte
/// map (in global memory under emulation; see `TensorMap::encode`).
#[track_caller]
pub fn tensor_global_to_shared(dst: u32, tensor_map: u64, coords: &[i32], mbar: u32) {
    let ex = exec("cp.async.bulk.tensor.shared::cta.global.tile");
    let ptr = match ex.cta.global.resolve(tensor_map, TENSOR_MAP_BYTES) {
        Ok(p) => p,
        Err(m) => ex.fail(ErrorKind::OutOfBounds, format!("tensor map: {m}")),
    };
    let mut raw = [0u8; TENSOR_MAP_BYTES];
    // SAFETY: `resolve` checked the range.
    unsafe { std::ptr::copy_nonoverlapping(ptr, raw.as_mut_ptr(), TENSOR_MAP_BYTES) };
    let map = match TensorMap::decode(&raw).and_then(|m| m.validate().map(|()| m)) {
        Ok(m) => m,
        Err(m) => ex.fail(ErrorKind::Unsupported, format!("tensor map at {tensor_map:#x}: {m}")),
    };
    if coords.len() != map.rank as usize {
        ex.fail(ErrorKind::Unsupported, format!("{}-d copy through a rank-{} tensor map", coords.len(), map.rank));
    }
    if let Err(m) = map.box_plan(coords, dst) {
        ex.fail(ErrorKind::OutOfBounds, m);
    }
    let bytes = map.box_bytes();
    enqueue(ex, Source::Tensor { map: Box::new(map), coords: coords.to_vec() }, dst, bytes, mbar);
}

/// Completes the oldest bulk copy: writes its data and signals its mbarrier.
pub(crate) fn complete_front(cta: &Cta<'_>, st: &mut CtaState) -> Result<(), EmuError> {
    let Some(copy) = st.bulk.pop_front() else { return Ok(()) };
    let fail = |kind, m: String| EmuError::new(kind, "cp.async.bulk", m).at(copy.thread, copy.loc);
    let base = st.smem.base;
    match &copy.source {
        Source::Linear { src } => {
            let ptr = cta.global.resolve(*src, copy.bytes as usize).map_err(|m| fail(ErrorKind::OutOfBounds, m))?;
            let i = (copy.dst - base) as usize;
            // SAFETY: `resolve` checked the range.
            let data = unsafe { std::slice::from_raw_parts(ptr, copy.bytes as usize) };
            st.smem.bytes[i..i + data.len()].copy_from_slice(data);
        }
        Source::Tensor { map, coords } => {
            let plan = map.box_plan(coords, copy.dst).map_err(|m| fail(ErrorKind::OutOfBounds, m))?;
            let fill = map.fill_element().map_err(|m| fail(ErrorKind::Unsupported, m))?;
            for run in plan {
                let (i, len) = ((run.smem_addr - base) as usize, run.bytes);
                let dst = &mut st.smem.bytes[i..i + len as usize];
                match run.global_addr {
                    Some(g) => {
                        let ptr = cta.global.resolve(g, len as usize).map_err(|m| fail(ErrorKind::OutOfBounds, m))?;
                        // SAFETY: `resolve` checked the range.
                        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(ptr, len as usize) });
                    }
                    None => dst.iter_mut().zip(fill.iter().cycle()).for_each(|(d, f)| *d = *f),
                }
            }
        }
    }
    let i = (copy.dst - base) as usize;
    st.smem.async_writers[i..i + copy.bytes as usize].iter_mut().for_each(|b| *b -= 1);
    // The write is the issuing thread's, at completion; so is the `complete_tx` release.
    let kind = crate::race::Kind::Bulk;
    crate::race::async_write_complete(st, copy.thread, i, copy.bytes as usize, kind, "cp.async.bulk", copy.loc)?;
    let m = st.mbarriers.get(&copy.mbarrier).ok_or_else(|| {
        fail(ErrorKind::Mbarrier, format!("mbarrier {:#x} of a bulk copy no longer exists", copy.mbarrier))
    })?;
    if !m.init_fenced {
        return Err(fail(
            ErrorKind::Mbarrier,
            format!(
                "a bulk copy (async proxy) signals mbarrier {:#x}, whose init ({}:{}) was never fenced with fence.mbarrier_init or fence.proxy.async",
                copy.mbarrier,
                m.init_loc.file(),
                m.init_loc.line()
            ),
        ));
    }
    crate::race::mbarrier_signal(st, copy.mbarrier, Some(copy.thread), |m| m.complete_tx(copy.bytes))
        .map_err(|msg| fail(ErrorKind::Mbarrier, format!("mbarrier {:#x}: {msg}", copy.mbarrier)))
}
