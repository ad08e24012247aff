//! Warp-level data movement (PTX ISA 9.7.8.6 `shfl.sync`).

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
