//! The NVFP4 block-scaled format as code, shared by the host, the kernels and the tests.
//!
//! NVFP4 stores a matrix as 4-bit e2m1 values with one fp8 e4m3 scale per 16 consecutive
//! values of a row. The GEMM this project computes is
//!
//! ```text
//! C[l][m][n] = fp16( sum over k of  a[l][m][k] * sfa[l][m][k/16] * b[l][n][k] * sfb[l][n][k/16] )
//! ```
//!
//! (in general `round(alpha · sum + bias[n])` to fp16 or bf16, see [`epilogue`])
//!
//! with A (M x K) and B (N x K) both K-major. Everything a kernel has to agree on with the
//! host about that format lives here, once:
//!
//! - [`e2m1`]: the 4-bit values (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives), two per byte,
//!   the even k in the low nibble.
//! - [`e4m3`]: the fp8 scales (bias 7, no infinities, NaN = 0x7F/0xFF, max 448), decoded
//!   exactly and encoded with PyTorch's rounding.
//! - [`epilogue`]: `C = round(alpha · acc + bias)` to fp16 or bf16, the order of its fp32
//!   operations fixed so the CPU reference reproduces every kernel bit for bit.
//! - [`shape`]: `M x N x K [x L]`, what a kernel accepts (K a multiple of 16) and the byte
//!   counts of every operand.
//! - [`layout`]: the "blocked" scale layout of cuBLAS and CuTe (128-row x 4-scale tiles of 512
//!   contiguous bytes), the only layout the kernels read scales in.
//! - [`swizzle`]: the shared-memory swizzles of the tensor cores and TMA.
//! - [`sm90`], [`sm100`]: the Hopper wgmma and Blackwell tcgen05 descriptors, built one bit
//!   field per commented line and checked against values that ran on hardware or were
//!   cross-checked with CUTLASS.
//!
//! The crate is `no_std` with no dependencies, and every function is `#[inline]`, `const` or
//! generic: the kernel crate is compiled to PTX crate by crate, so only inlinable code can cross
//! over. The functions a kernel calls on its hot path (decoders, offsets, swizzles, descriptor
//! builders) never panic; the few that check their arguments with `assert!` say so and are
//! meant for constants, where the check runs at compile time.
#![no_std]

#[cfg(test)]
extern crate std;

pub mod e2m1;
pub mod e4m3;
pub mod epilogue;
pub mod layout;
pub mod operand;
pub mod shape;
pub mod sm100;
pub mod sm90;
pub mod swizzle;

pub use shape::{Shape, ShapeError};
