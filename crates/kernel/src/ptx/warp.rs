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

/// Defines a warp-level `mma.sync.aligned.m16n8k16.row.col.f32.<in>.<in>.f32` wrapper for
/// one input type (the fragment layout is the same for fp16 and bf16).
macro_rules! mma_m16n8k16 {
    ($(#[$doc:meta])* $name:ident, $inputs:literal) => {
        $(#[$doc])*
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub fn $name(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
            #[cfg(target_arch = "nvptx64")]
            {
                let mut d = c;
                // SAFETY: warp-collective on registers only; every lane executes it.
                unsafe {
                    asm!(
                        concat!(
                            "mma.sync.aligned.m16n8k16.row.col.f32.", $inputs, ".", $inputs, ".f32 ",
                            "{{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};"
                        ),
                        d0 = inout(reg32) d[0],
                        d1 = inout(reg32) d[1],
                        d2 = inout(reg32) d[2],
                        d3 = inout(reg32) d[3],
                        a0 = in(reg32) a[0],
                        a1 = in(reg32) a[1],
                        a2 = in(reg32) a[2],
                        a3 = in(reg32) a[3],
                        b0 = in(reg32) b[0],
                        b1 = in(reg32) b[1],
                        options(pure, nomem, nostack)
                    )
                };
                d
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                emu::ops::warp::$name(a, b, c)
            }
        }
    };
}

mma_m16n8k16!(
    /// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d0..d3}, {a0..a3}, {b0, b1},
    /// {c0..c3};` — one warp's D = A·B + C on the tensor cores: A 16 x 16 f16 (four
    /// registers of two), B 16 x 8 f16 (two), C and D 16 x 8 f32 (four). Lane g·4 + t holds
    /// A rows g and g + 8 at k 2t, 2t + 1 (a0, a1) and 2t + 8, 2t + 9 (a2, a3), B column g
    /// at those k (b0, b1), D rows g and g + 8 at columns 2t, 2t + 1 (PTX ISA 9.7.13.4.8;
    /// the emulator's `ops::warp::a_coord` and its neighbours spell it out). All 32 lanes
    /// must execute it.
    mma_m16n8k16_f32_f16,
    "f16"
);

mma_m16n8k16!(
    /// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: [`mma_m16n8k16_f32_f16`] with
    /// bf16 inputs, in the same fragments.
    mma_m16n8k16_f32_bf16,
    "bf16"
);
