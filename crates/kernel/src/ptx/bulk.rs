//! Bulk asynchronous copies through the async proxy (PTX ISA 9.7.9.25.4
//! `cp.async.bulk`, 9.7.9.25.5 `cp.async.bulk.tensor`), completing on an mbarrier.
//!
//! One thread issues each copy; the copy writes shared memory through the async proxy and,
//! once its bytes have landed, performs `complete_tx` of that many bytes on the mbarrier.
//! The phase the copy belongs to must expect those bytes (`Mbarrier::arrive_expect_tx`),
//! and readers wait for the phase. No `fence.proxy.async` is needed before generic reads:
//! the mbarrier's completion makes the data visible.
//!
//! The destination state space is written `.shared::cluster` (PTX ISA 8.0, what the
//! `sm_90a` target's default PTX version accepts; `.shared::cta` needs 8.6): a shared::cta
//! address of the executing CTA is a valid shared::cluster address of the same bytes.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use super::SmemAddr;
use super::mbarrier::Mbarrier;

/// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size,
/// [bar];` — copies `size` bytes (a multiple of 16; `dst` and `src` 16-byte aligned) from
/// global to shared memory, then `complete_tx(size)` on `bar`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn global_to_shared(dst: SmemAddr, src: u64, size: u32, bar: Mbarrier) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: single-thread issue; `dst..dst+size` is shared memory of this CTA that nothing
    // else touches until `bar`'s phase completes, `src..src+size` valid global memory.
    unsafe {
        asm!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{}], [{}], {}, [{}];",
            in(reg32) dst.0, in(reg64) src, in(reg32) size, in(reg32) bar.0.0,
            options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::bulk::global_to_shared(dst.0, src, size, bar.0.0)
}

/// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst],
/// [tensor_map, {x, y}], [bar];` — copies the box at element coordinates (`x` innermost,
/// `y`; signed, may lie partly or wholly outside the tensor, whose elements are then
/// filled) through the tensor map at global address `tensor_map` (64-byte aligned, written
/// before the launch), swizzled as the map says, then `complete_tx(box bytes)` on `bar`.
/// `dst` must be aligned to the swizzle's repeat (1024 bytes for 128B).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn tensor_2d_global_to_shared(dst: SmemAddr, tensor_map: u64, x: i32, y: i32, bar: Mbarrier) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `global_to_shared`; `tensor_map` addresses a valid CUtensorMap.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{}], [{}, {{{}, {}}}], [{}];",
            in(reg32) dst.0, in(reg64) tensor_map, in(reg32) x, in(reg32) y, in(reg32) bar.0.0,
            options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::bulk::tensor_global_to_shared(dst.0, tensor_map, &[x, y], bar.0.0)
}
