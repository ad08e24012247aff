//! Warp-level data movement (PTX ISA 9.7.8.6 `shfl.sync`) and the warpgroup register
//! budget (`setmaxnreg`).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `shfl.sync.idx.b32 d, value, src_lane, 0x1f, 0xffffffff;` — every lane of the warp
/// receives `value` from lane `src_lane`. All 32 lanes must execute it.
///
/// Besides moving data, it tells the compiler the result is the same in every lane of
/// the warp: a branch on it is warp-uniform.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_sync_idx(value: u32, src_lane: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: warp-collective, full mask; every lane executes it.
        unsafe {
            asm!("shfl.sync.idx.b32 {}, {}, {}, 0x1f, 0xffffffff;", out(reg32) r, in(reg32) value, in(reg32) src_lane, options(nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::warp::shfl_sync_idx(value, src_lane)
    }
}

/// `setmaxnreg.inc.sync.aligned.u32 N;` — raises the per-thread register budget of this
/// thread's warpgroup to `N` (24..=256, a multiple of 8); every thread of the warpgroup
/// executes it. The registers come from those other warpgroups of the CTA gave back with
/// `.dec`: the instruction waits until they are free, so an `.inc` past the CTA's launch
/// allocation never returns.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn setmaxnreg_inc<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective; every thread of the warpgroup executes it.
    unsafe {
        asm!("setmaxnreg.inc.sync.aligned.u32 {};", const N, options(nomem, nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::warp::setmaxnreg(true, N)
}

/// `setmaxnreg.dec.sync.aligned.u32 N;` — lowers it to `N`, returning the rest to the
/// CTA's pool.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn setmaxnreg_dec<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `setmaxnreg_inc`.
    unsafe {
        asm!("setmaxnreg.dec.sync.aligned.u32 {};", const N, options(nomem, nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::warp::setmaxnreg(false, N)
}
