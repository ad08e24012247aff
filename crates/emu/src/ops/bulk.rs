//! Bulk asynchronous copies through the async proxy (PTX ISA 9.7.9.25.4):
//! `cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes` (1-D) and
//! `cp.async.bulk.tensor.Nd.shared::cta.global.tile.mbarrier::complete_tx::bytes`.
//!
//! Both write shared memory through the async proxy and signal `complete_tx` with the
//! bytes delivered on an mbarrier. Under emulation the data lands only when no thread can
//! run without it (the latest moment the rules allow); until then the destination bytes
//! belong to the copy. A tensor copy always delivers the whole box: elements outside the
//! tensor are filled, and they count toward the transaction bytes. The copies in flight
//! and their completion are the bulk unit, `units::bulk`.

use super::exec;
use crate::model::tensor_map::TensorMap;
use crate::report::ErrorKind;
use crate::units::bulk::{BulkCopies, BulkCopy, Source};

/// Bytes of the opaque tensor-map object (`CUtensorMap`).
pub const TENSOR_MAP_BYTES: usize = 128;

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
    ex.st.units.get_mut::<BulkCopies>().queue.push_back(BulkCopy {
        sequence,
        source,
        dst,
        bytes,
        mbarrier: mbar,
        thread,
        loc,
    });
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
