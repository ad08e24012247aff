//! The NVFP4 GEMM kernels, C = A·Bᵀ with e2m1 operands and e4m3 block scales, fp16 or bf16
//! out through the [`epilogue`] (alpha, bias).
//!
//! Every kernel compiles twice: for `nvptx64-nvidia-cuda`, where the `ptx` layer is
//! inline PTX, and for the host, where the `ptx` layer calls the `emu` crate's CPU model
//! of each instruction and the kernel's threads run as host threads. The host crate's
//! build script builds this crate once per GPU target and embeds each PTX:
//!
//! | PTX target | kernels |
//! |---|---|
//! | `sm_75` (portable) | [`naive`], [`dequant`], [`stream`] |
//! | `sm_90a` | [`naive`], [`dequant`], [`stream`], [`sm90`], [`sm90v2`], [`gemv`], [`skinny`] |
//! | `sm_100a` (+PTX 8.7) | [`naive`], [`dequant`], [`stream`], [`sm100`] |
//!
//! [`dequant`] and [`stream`] are not GEMMs: the first turns NVFP4 operands into fp16 for
//! the benchmark's "dequantize, then cuBLAS" baseline, the second is a plain read that
//! measures the benchmark's bandwidth floor at decode sizes.
//!
//! The [`probes`] (one tiny kernel per modelled instruction family, `host selftest
//! --probes`) are in the `sm_90a` and `sm_100a` builds (`probe_warp` in all three).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

/// Defines the GPU entry point `$name` of a GEMM kernel body: the [`GemmArgs`] fields
/// as scalar kernel parameters (device addresses as u64), so any launcher can pass them
/// without agreeing on a struct layout.
///
/// The entry point is `unsafe`: the addresses must be device allocations of the sizes
/// [`GemmArgs`] describes, and the launch must use the kernel's own launch geometry.
macro_rules! gemm_entry_point {
    ($name:ident => $body:path) => {
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments, missing_docs)]
        pub unsafe extern "ptx-kernel" fn $name(
            a: u64,
            b: u64,
            sfa: u64,
            sfb: u64,
            c: u64,
            workspace: u64,
            m: u32,
            n: u32,
            k: u32,
            l: u32,
            alpha: f32,
            alpha_ptr: u64,
            bias: u64,
            out_dtype: u32,
            a_format: u32,
            sms: u32,
        ) {
            $body(&$crate::GemmArgs {
                a,
                b,
                sfa,
                sfb,
                c,
                workspace,
                m,
                n,
                k,
                l,
                alpha,
                alpha_ptr,
                bias,
                out_dtype,
                a_format,
                sms,
            })
        }
    };
}

pub mod dequant;
pub mod epilogue;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod gemv;
pub mod naive;
pub mod probes;
pub mod ptx;
mod ring;
mod rows;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod skinny;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_100a"))]
pub mod sm100;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod sm90;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod sm90v2;
pub mod stream;

/// Registers of one SM (64 K of 32 bits), shared out over its resident threads.
pub const REGISTERS_PER_SM: u32 = 65536;

/// A kernel's launch bounds as the host's build script writes them into the PTX (entry,
/// threads per CTA, CTAs per SM, registers per thread: the SM's registers over its threads).
pub const fn launch_bounds(entry: &'static str, threads: u32, ctas_per_sm: u32) -> (&'static str, u32, u32, u32) {
    (entry, threads, ctas_per_sm, REGISTERS_PER_SM / (ctas_per_sm * threads))
}

/// The arguments every GEMM kernel takes: device addresses, the shape and the epilogue.
///
/// `a` is `[L][M][K/2]` packed e2m1, `b` `[L][N][K/2]`, `sfa`/`sfb` the blocked e4m3 scales
/// (L batches of `nvfp4::layout::batch_bytes(rows, K/16)` bytes), `c` `[L][M][N]` of
/// `out_dtype` (an [`nvfp4::epilogue::OutDtype`] code: fp16 or bf16), computed as
/// `round(alpha · acc + bias[n])` ([`epilogue`]): `alpha` is read from `alpha_ptr` (one
/// f32) when that is not 0, and `bias` (`[N]`, C's type) is added when it is not 0.
/// `workspace` is scratch for kernels that split K across CTAs (the kernel module's
/// `workspace_bytes`, 0 for most shapes and kernels): zero-filled before a kernel's first
/// launch, and left zero-filled where it must be by every launch.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct GemmArgs {
    pub a: u64,
    pub b: u64,
    pub sfa: u64,
    pub sfb: u64,
    pub c: u64,
    pub workspace: u64,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub l: u32,
    pub alpha: f32,
    pub alpha_ptr: u64,
    pub bias: u64,
    pub out_dtype: u32,
    /// An [`nvfp4::operand::AFormat`] code: A as NVFP4 (with SFA) or as fp16 values
    /// (W4A16, SFA unused; only the kernels that say so read it).
    pub a_format: u32,
    /// The GPU's SM count. The kernels that size their grid to the GPU (sm90v2's waves
    /// and split K, sm100's persistent grid and split K) derive their work decomposition
    /// from it, in the kernel as in the host's launch, so both must get the same value
    /// (0 reads as 1).
    pub sms: u32,
}

impl GemmArgs {
    /// No buffers, an empty shape, the identity epilogue (alpha 1 as an argument, no bias,
    /// fp16): a base for `GemmArgs { a, b, .., ..GemmArgs::IDENTITY }`.
    pub const IDENTITY: GemmArgs = GemmArgs {
        a: 0,
        b: 0,
        sfa: 0,
        sfb: 0,
        c: 0,
        workspace: 0,
        m: 0,
        n: 0,
        k: 0,
        l: 0,
        alpha: 1.0,
        alpha_ptr: 0,
        bias: 0,
        out_dtype: nvfp4::epilogue::OutDtype::F16.code(),
        a_format: nvfp4::operand::AFormat::Nvfp4.code(),
        sms: 0,
    };
}

/// How to launch a kernel: grid, CTA size and dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem: u32,
}

/// Largest `gridDim.y` / `gridDim.z` (the x dimension allows 2^31 - 1).
pub const MAX_GRID_YZ: u32 = 65_535;
