//! The last step of every kernel: `C[n] = round(alpha · acc + bias[n])` in fp16 or bf16.
//!
//! The order of the fp32 operations is [`nvfp4::epilogue`]'s, so the CPU reference
//! reproduces it: no bias, one `mul.rn.f32`; with a bias, one `fma.rn.f32` (the bias, fp16
//! or bf16 like C, widened exactly). Then one rounding to C's type (`cvt.rn.f16x2.f32` or
//! `cvt.rn.bf16x2.f32`). `alpha` is a kernel argument or, when `alpha_ptr` is set, one f32
//! in GPU memory read at the start of the epilogue, so a captured CUDA graph replays with
//! whatever the caller's tensor holds then.

use nvfp4::epilogue::OutDtype;

use crate::GemmArgs;
use crate::ptx::{cvt, memory};

/// Bytes per element of C and of the bias (fp16 and bf16 alike).
pub const OUT_BYTES: u32 = 2;

/// The epilogue of one launch, resolved once per thread.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue {
    alpha: f32,
    /// The power of two the accumulators carry besides the sums (1 unless [`Epilogue::scaled`]).
    factor: f32,
    /// Address of the bias vector ([N], C's type), 0 for none.
    bias: u64,
    out: OutDtype,
}

impl Epilogue {
    /// Reads the launch's epilogue arguments (and `alpha` from memory when it lives there).
    /// An unknown `out_dtype` code is treated as fp16: the host never passes one.
    #[inline(always)]
    pub fn load(args: &GemmArgs) -> Epilogue {
        let alpha =
            if args.alpha_ptr != 0 { f32::from_bits(memory::ld_global_nc_u32(args.alpha_ptr)) } else { args.alpha };
        let out = match OutDtype::from_code(args.out_dtype) {
            Some(out) => out,
            None => OutDtype::F16,
        };
        Epilogue { alpha, factor: 1.0, bias: args.bias, out }
    }

    /// This epilogue for accumulators that carry `factor` (a power of two) times the sums it
    /// was written for: each accumulator is multiplied by `factor` first, exactly, so the
    /// one rounding of alpha times it is the reference's. (Folding `factor` into alpha
    /// instead would save that multiply and overflow for an alpha beyond 2^127 / factor.)
    #[inline(always)]
    pub fn scaled(self, factor: f32) -> Epilogue {
        Epilogue { factor: cvt::mul_f32(self.factor, factor), ..self }
    }

    /// Whether it adds a bias vector.
    #[inline(always)]
    pub fn adds_bias(&self) -> bool {
        self.bias != 0
    }

    /// `alpha · acc` in fp32, before the rounding: [`Epilogue::value`] without a bias.
    #[inline(always)]
    fn unbiased(&self, acc: f32) -> f32 {
        cvt::mul_f32(cvt::mul_f32(acc, self.factor), self.alpha)
    }

    /// `alpha · acc + bias` in fp32, before the rounding, `bias` one of [`Epilogue::bias_at`].
    #[inline(always)]
    fn biased(&self, acc: f32, bias: f32) -> f32 {
        self.biased_scaled(cvt::mul_f32(acc, self.factor), bias)
    }

    /// [`Epilogue::biased`] of `acc` already multiplied by the factor.
    #[inline(always)]
    fn biased_scaled(&self, scaled: f32, bias: f32) -> f32 {
        cvt::fma_f32(scaled, self.alpha, bias)
    }

    /// `bias[n]`, widened exactly to fp32. Only for an epilogue that adds a bias
    /// ([`Epilogue::adds_bias`]), and `n` inside N.
    #[inline(always)]
    pub fn bias_at(&self, n: u32) -> f32 {
        debug_assert!(self.adds_bias());
        let bits = memory::ld_global_nc_u16(self.bias + (n * OUT_BYTES) as u64);
        match self.out {
            OutDtype::F16 => cvt::f32_from_f16(bits),
            OutDtype::Bf16 => nvfp4::epilogue::bf16_to_f32(bits),
        }
    }

    /// `alpha · acc (+ bias[n])` in fp32, before the rounding.
    #[inline(always)]
    pub fn value(&self, acc: f32, n: u32) -> f32 {
        if self.bias == 0 {
            return self.unbiased(acc);
        }
        // The factor's multiply before the bias's load: the order the GEMV, the skinny
        // kernel and sm90's epilogues were measured with (the other order moves their SASS).
        let scaled = cvt::mul_f32(acc, self.factor);
        self.biased_scaled(scaled, self.bias_at(n))
    }

    /// Columns `n` and `n + 1` of a row, as one 32-bit word (column `n` in the low half).
    /// Both columns must exist.
    #[inline(always)]
    pub fn pair(&self, acc_n: f32, acc_n1: f32, n: u32) -> u32 {
        let (lo, hi) = (self.value(acc_n, n), self.value(acc_n1, n + 1));
        match self.out {
            OutDtype::F16 => cvt::f16x2_from_f32(hi, lo),
            OutDtype::Bf16 => cvt::bf16x2_from_f32(hi, lo),
        }
    }

    /// Column `n` alone (a row's last column when N is odd, or any column of a naive thread).
    #[inline(always)]
    pub fn one(&self, acc: f32, n: u32) -> u16 {
        self.rounded(self.value(acc, n))
    }

    /// [`Epilogue::one`] of an epilogue that adds no bias ([`Epilogue::adds_bias`]): the
    /// same value, with no test.
    #[inline(always)]
    pub fn one_unbiased(&self, acc: f32) -> u16 {
        debug_assert!(!self.adds_bias());
        self.rounded(self.unbiased(acc))
    }

    /// [`Epilogue::one`] of an epilogue that adds a bias, given the column's bias
    /// ([`Epilogue::bias_at`]): the same value, with no test and no load.
    #[inline(always)]
    pub fn one_biased(&self, acc: f32, bias: f32) -> u16 {
        debug_assert!(self.adds_bias());
        self.rounded(self.biased(acc, bias))
    }

    /// `v` rounded to C's type.
    #[inline(always)]
    fn rounded(&self, v: f32) -> u16 {
        match self.out {
            OutDtype::F16 => cvt::f16_from_f32(v),
            // The pair conversion's low half: one instruction on every architecture.
            OutDtype::Bf16 => cvt::bf16x2_from_f32(0.0, v) as u16,
        }
    }
}
