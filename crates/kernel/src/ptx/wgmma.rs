//! Warpgroup matrix multiply-accumulate (PTX ISA 9.7.15, Hopper `sm_90a`).
//!
//! A warpgroup (4 consecutive warps, the first a multiple of 4) issues
//! `wgmma.mma_async` together; the operation runs asynchronously on the tensor cores.
//! The rules the kernels follow (PTX ISA 9.7.15.4):
//! - `fence()` before the first `mma_async` and after any other access to the
//!   accumulator registers, before the `mma_async` that uses them;
//! - `commit_group()` closes the issued operations into a group, `wait_group::<N>()`
//!   waits until at most N groups are pending; only then may the accumulators be read or
//!   the shared memory they read be overwritten;
//! - `fence_operand` after a wait keeps the compiler from moving accumulator reads above
//!   it (the registers change behind the compiler's back).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use nvfp4::sm90::SmemDesc;

/// `wgmma.fence.sync.aligned;`
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective, no operands.
    unsafe {
        asm!("wgmma.fence.sync.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::wgmma::fence()
}

/// `wgmma.commit_group.sync.aligned;`
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective, no operands.
    unsafe {
        asm!("wgmma.commit_group.sync.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::wgmma::commit_group()
}

/// `wgmma.wait_group.sync.aligned N;`
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-collective, an immediate operand.
    unsafe {
        asm!("wgmma.wait_group.sync.aligned {};", const N, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::wgmma::wait_group(N)
}

/// Accumulator fragments `fence_operand` accepts (one per wgmma shape in use).
pub trait Fragment {
    /// See [`fence_operand`].
    fn fence_operand(&mut self);
}

macro_rules! fragment {
    ($regs:literal, [$($i:literal)*]) => {
        impl Fragment for [f32; $regs] {
            #[inline(always)]
            fn fence_operand(&mut self) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: an empty template (a PTX comment); only constrains the compiler.
                unsafe {
                    asm!(concat!("// ", super::operand_list!($($i)*)), $(inout(reg32) self[$i],)* options(nomem, nostack, preserves_flags))
                };
                #[cfg(not(target_arch = "nvptx64"))]
                core::hint::black_box(self);
            }
        }
    };
}

fragment!(8, [0 1 2 3 4 5 6 7]);
fragment!(16, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
fragment!(32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]);
fragment!(64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]);
fragment!(128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]);

/// Tells the compiler every accumulator register may have changed here: no read of them
/// moves above this point and no write below it. One empty `asm!` naming all of them,
/// so it emits no instruction (CUTLASS's `warpgroup_fence_operand`).
#[inline(always)]
pub fn fence_operand<F: Fragment>(acc: &mut F) {
    acc.fence_operand()
}

macro_rules! mma_async_ss {
    ($(#[$doc:meta])* $name:ident, $n:literal, $regs:literal, [$($i:literal)*]) => {
        $(#[$doc])*
        ///
        /// `scale-d` is `accumulate`: false computes D = A·B, true D = A·B + D. A and B are
        /// K-major fp16 tiles in shared memory described by `a` and `b`; the descriptors
        /// must be identical in all 128 threads.
        ///
        /// # Safety
        /// The operation completes asynchronously: until a `wait_group` covers it, the
        /// thread must neither read nor write `acc`, nor overwrite the shared memory
        /// the descriptors address, and `acc` must stay alive.
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub unsafe fn $name(acc: &mut [f32; $regs], a: SmemDesc, b: SmemDesc, accumulate: bool) {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: upheld by the caller as documented.
            unsafe {
                asm!(
                    "{{",
                    ".reg .pred p;",
                    "setp.ne.b32 p, {sd}, 0;",
                    concat!(
                        "wgmma.mma_async.sync.aligned.m64n", stringify!($n), "k16.f32.f16.f16 {{",
                        super::operand_list!($($i)*),
                        "}}, {da}, {db}, p, 1, 1, 0, 0;"
                    ),
                    "}}",
                    $(inout(reg32) acc[$i],)*
                    sd = in(reg32) accumulate as u32,
                    da = in(reg64) a.0,
                    db = in(reg64) b.0,
                    options(nostack)
                )
            };
            #[cfg(not(target_arch = "nvptx64"))]
            // SAFETY: upheld by the caller as documented.
            unsafe {
                emu::ops::wgmma::mma_async(emu::ops::wgmma::MmaArgs {
                    accumulators: acc.as_mut_ptr(),
                    n: $n,
                    a: a.0,
                    desc_b: b.0,
                    accumulate,
                    negate_a: false,
                    negate_b: false,
                    a_in_registers: false,
                    inputs: emu::model::wgmma::Inputs::F16,
                })
            }
        }
    };
}

mma_async_ss!(
    /// `wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {d0..d31}, a, b, p, 1, 1, 0, 0;`
    /// — `D[64x64] (+)= A[64x16] · B[64x16]^T`, f32 accumulators, 32 per thread.
    mma_async_ss_m64n64, 64, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]
);

mma_async_ss!(
    /// `wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {d0..d63}, a, b, p, 1, 1, 0, 0;`
    /// — `D[64x128] (+)= A[64x16] · B[128x16]^T`, f32 accumulators, 64 per thread.
    mma_async_ss_m64n128, 128, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
);

macro_rules! mma_async_rs {
    ($(#[$doc:meta])* $name:ident, $n:literal, $ty:literal, $inputs:ident, $regs:literal, [$($i:literal)*]) => {
        $(#[$doc])*
        ///
        /// The RS form: A comes from registers, four `.b32` per thread holding eight 16-bit
        /// values, fp16 or bf16 as the name says (thread `tid` of the warpgroup, `w =
        /// tid/32`, `g = lane/4`, `t = lane%4`: `a[0]` = row 16w+g, k 2t..2t+1; `a[1]` = row
        /// 16w+g+8, same k; `a[2]`, `a[3]` the same rows at k 2t+8..2t+9; the lower k in the
        /// low half; the same layout for both types). B is a K-major tile of the same type
        /// in shared memory described by `b`, identical in all 128 threads.
        /// `accumulate` as in the SS form.
        ///
        /// # Safety
        /// As the SS form; in addition `a` must stay alive and unchanged until a
        /// `wait_group` covers the operation.
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub unsafe fn $name(acc: &mut [f32; $regs], a: &[u32; 4], b: SmemDesc, accumulate: bool) {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: upheld by the caller as documented.
            unsafe {
                asm!(
                    "{{",
                    ".reg .pred p;",
                    "setp.ne.b32 p, {sd}, 0;",
                    concat!(
                        "wgmma.mma_async.sync.aligned.m64n", stringify!($n), "k16.f32.", $ty, ".", $ty, " {{",
                        super::operand_list!($($i)*),
                        "}}, {{{a0}, {a1}, {a2}, {a3}}}, {db}, p, 1, 1, 0;"
                    ),
                    "}}",
                    $(inout(reg32) acc[$i],)*
                    sd = in(reg32) accumulate as u32,
                    a0 = in(reg32) a[0],
                    a1 = in(reg32) a[1],
                    a2 = in(reg32) a[2],
                    a3 = in(reg32) a[3],
                    db = in(reg64) b.0,
                    options(nostack)
                )
            };
            #[cfg(not(target_arch = "nvptx64"))]
            // SAFETY: upheld by the caller as documented.
            unsafe {
                emu::ops::wgmma::mma_async(emu::ops::wgmma::MmaArgs {
                    accumulators: acc.as_mut_ptr(),
                    n: $n,
                    a: a.as_ptr() as u64,
                    desc_b: b.0,
                    accumulate,
                    negate_a: false,
                    negate_b: false,
                    a_in_registers: true,
                    inputs: emu::model::wgmma::Inputs::$inputs,
                })
            }
        }
    };
}

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {d0..d7}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — `D[64x16] (+)= A[64x16] · B[16x16]^T`, A from registers, f32 accumulators, 8 per
    /// thread.
    mma_async_rs_m64n16, 16, "f16", F16, 8, [0 1 2 3 4 5 6 7]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {d0..d15}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — `D[64x32] (+)= A[64x16] · B[32x16]^T`, A from registers, f32 accumulators, 16 per
    /// thread.
    mma_async_rs_m64n32, 32, "f16", F16, 16, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {d0..d31}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — `D[64x64] (+)= A[64x16] · B[64x16]^T`, A from registers, f32 accumulators, 32 per
    /// thread.
    mma_async_rs_m64n64, 64, "f16", F16, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {d0..d63}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — `D[64x128] (+)= A[64x16] · B[128x16]^T`, A from registers, f32 accumulators, 64
    /// per thread.
    mma_async_rs_m64n128, 128, "f16", F16, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {d0..d7}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — as [`mma_async_rs_m64n16`] with bf16 operands (the same fragment layouts).
    mma_async_rs_bf16_m64n16, 16, "bf16", Bf16, 8, [0 1 2 3 4 5 6 7]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {d0..d15}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — as [`mma_async_rs_m64n32`] with bf16 operands (the same fragment layouts).
    mma_async_rs_bf16_m64n32, 32, "bf16", Bf16, 16, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {d0..d31}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — as [`mma_async_rs_m64n64`] with bf16 operands (the same fragment layouts).
    mma_async_rs_bf16_m64n64, 64, "bf16", Bf16, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {d0..d63}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — as [`mma_async_rs_m64n128`] with bf16 operands (the same fragment layouts).
    mma_async_rs_bf16_m64n128, 128, "bf16", Bf16, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {d0..d127}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — `D[64x256] (+)= A[64x16] · B[256x16]^T`, A from registers, f32 accumulators, 128
    /// per thread: in the layout of two m64n128 blocks side by side (registers 64..128
    /// hold columns 128..256 exactly as registers 0..64 hold columns 0..128).
    mma_async_rs_m64n256, 256, "f16", F16, 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
);

mma_async_rs!(
    /// `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {d0..d127}, {a0, a1, a2, a3}, b, p, 1, 1, 0;`
    /// — as [`mma_async_rs_m64n256`] with bf16 operands (the same fragment layouts).
    mma_async_rs_bf16_m64n256, 256, "bf16", Bf16, 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
);
