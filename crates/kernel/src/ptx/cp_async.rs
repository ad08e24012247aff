//! Non-bulk asynchronous copies, global to shared (PTX ISA 9.7.9.25.3 `cp.async`).
//!
//! A thread's copies are grouped with `commit_group`; `wait_group::<N>` waits until at
//! most its N newest groups are pending. The data is written through the generic proxy:
//! before a tensor-core (async-proxy) read of it, `fence::proxy_async_shared_cta`.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use super::SmemAddr;
use super::mbarrier::Mbarrier;

/// `cp.async.cg.shared.global [dst], [src], 16, src_size;` — copies 16 bytes through L2
/// only (bypassing L1); bytes past `src_size` (0..=16) are zero-filled, so a
/// `src_size` of 0 reads nothing and writes zeros (how tiles past the matrix edge are
/// masked).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn cg_16(dst: SmemAddr, src: u64, src_size: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: `dst` and `src` are 16-byte aligned addresses the kernel owns.
    unsafe {
        asm!("cp.async.cg.shared.global [{}], [{}], 16, {};", in(reg32) dst.0, in(reg64) src, in(reg32) src_size, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::cp_async::copy(dst.0, src, 16, src_size)
}

/// `cp.async.cg.shared.global.L2::128B [dst], [src], 16, src_size;` — [`cg_16`], and L2
/// fetches the whole aligned 128 bytes around `src` from DRAM (a hint: nothing changes in
/// what is copied). For a row read 32 bytes at a time by stages that come one after
/// another, the next three stages' bytes then arrive with this one in one DRAM request
/// instead of one 32-byte sector request each.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn cg_16_l2_128(dst: SmemAddr, src: u64, src_size: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `cg_16`.
    unsafe {
        asm!("cp.async.cg.shared.global.L2::128B [{}], [{}], 16, {};", in(reg32) dst.0, in(reg64) src, in(reg32) src_size, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::cp_async::copy(dst.0, src, 16, src_size)
}

/// `cp.async.ca.shared.global [dst], [src], 4, src_size;` — a 4-byte copy (cached in L1).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ca_4(dst: SmemAddr, src: u64, src_size: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `cg_16`, 4-byte aligned.
    unsafe {
        asm!("cp.async.ca.shared.global [{}], [{}], 4, {};", in(reg32) dst.0, in(reg64) src, in(reg32) src_size, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::cp_async::copy(dst.0, src, 4, src_size)
}

/// `cp.async.ca.shared.global [dst], [src], 8, src_size;` — an 8-byte copy (cached in
/// L1); bytes past `src_size` (0..=8) are zero-filled.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn ca_8(dst: SmemAddr, src: u64, src_size: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as in `cg_16`, 8-byte aligned.
    unsafe {
        asm!("cp.async.ca.shared.global [{}], [{}], 8, {};", in(reg32) dst.0, in(reg64) src, in(reg32) src_size, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::cp_async::copy(dst.0, src, 8, src_size)
}

/// `cp.async.commit_group;` — closes this thread's uncommitted copies into a group.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("cp.async.commit_group;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::cp_async::commit_group()
}

/// `cp.async.wait_group N;` — waits until at most the `N` newest groups are pending.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands besides the immediate.
    unsafe {
        asm!("cp.async.wait_group {};", const N, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::cp_async::wait_group(N)
}

/// `cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar];` — one arrival on `bar` once
/// all this thread's earlier cp.async have completed; `.noinc` means the arrival counts
/// toward the barrier's init count.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mbarrier_arrive_noinc(bar: Mbarrier) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: `bar` is an initialised mbarrier.
    unsafe {
        asm!("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{}];", in(reg32) bar.0.0, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::cp_async::mbarrier_arrive(bar.0.0, true)
}
