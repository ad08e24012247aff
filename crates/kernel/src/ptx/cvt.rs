//! Conversions, packed half-precision arithmetic and the fp32 arithmetic of the epilogue
//! (PTX ISA 9.7.9.21 `cvt`, 9.7.4 half-precision, 9.7.3 floating-point instructions).
//!
//! The fp32 operations are spelled out (`mul.rn`, `fma.rn`) rather than left to `*` and
//! `mul_add`: an explicit rounding modifier forbids ptxas from contracting a multiply and
//! an add into one fma, so the GPU rounds exactly where the CPU reference does.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `cvt.rn.f16x2.e4m3x2 d, a;` — two e4m3 bytes to two fp16 values, exactly (every
/// e4m3 value is an fp16 value): byte 0 becomes the low half, byte 1 the high half.
/// One SASS instruction (`F2FP.F16.E4M3.UNPACK_B`) on sm_89 and later.
#[inline(always)]
pub fn f16x2_from_e4m3x2(pair: u16) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: register-only arithmetic.
        unsafe { asm!("cvt.rn.f16x2.e4m3x2 {}, {};", out(reg32) r, in(reg16) pair, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::cvt_f16x2_e4m3x2(pair)
    }
}

/// `mul.rn.f16x2 d, a, b;` — two fp16 products, each rounded to nearest even.
#[inline(always)]
pub fn mul_f16x2(a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("mul.rn.f16x2 {}, {}, {};", out(reg32) r, in(reg32) a, in(reg32) b, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::mul_f16x2(a, b)
    }
}

/// `mul.rn.bf16x2 d, a, b;` — two bf16 products, each rounded to nearest even (sm_90+;
/// subnormal inputs are kept, which the bf16 W4A16 weights rely on).
#[inline(always)]
pub fn mul_bf16x2(a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("mul.rn.bf16x2 {}, {}, {};", out(reg32) r, in(reg32) a, in(reg32) b, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::mul_bf16x2(a, b)
    }
}

/// `cvt.rn.f16x2.f32 d, hi, lo;` — two f32 to one fp16 pair, rounded to nearest even;
/// note the order: the first source goes to the UPPER half.
#[inline(always)]
pub fn f16x2_from_f32(hi: f32, lo: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("cvt.rn.f16x2.f32 {}, {}, {};", out(reg32) r, in(reg32) hi, in(reg32) lo, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::cvt_f16x2_f32(hi, lo)
    }
}

/// `cvt.rn.f16.f32 d, a;` — one f32 to fp16, rounded to nearest even.
#[inline(always)]
pub fn f16_from_f32(a: f32) -> u16 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u16;
        // SAFETY: register-only arithmetic.
        unsafe { asm!("cvt.rn.f16.f32 {}, {};", out(reg16) r, in(reg32) a, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::cvt_f16_f32(a)
    }
}

/// `cvt.rn.bf16x2.f32 d, hi, lo;` — two f32 to one bf16 pair, rounded to nearest even
/// (NaN → 0x7FFF); like the fp16 form, the first source goes to the UPPER half.
///
/// The instruction exists from sm_80; the portable (sm_75) build rounds in software
/// ([`nvfp4::epilogue::bf16_from_f32`], the same rounding bit for bit).
#[inline(always)]
pub fn bf16x2_from_f32(hi: f32, lo: f32) -> u32 {
    #[cfg(all(target_arch = "nvptx64", any(target_feature = "sm_90a", target_feature = "sm_100a")))]
    {
        let r: u32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("cvt.rn.bf16x2.f32 {}, {}, {};", out(reg32) r, in(reg32) hi, in(reg32) lo, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(all(target_arch = "nvptx64", not(any(target_feature = "sm_90a", target_feature = "sm_100a"))))]
    {
        use nvfp4::epilogue::bf16_from_f32;
        (bf16_from_f32(hi) as u32) << 16 | bf16_from_f32(lo) as u32
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::cvt_bf16x2_f32(hi, lo)
    }
}

/// `cvt.f32.f16 d, a;` — fp16 to f32, exactly.
#[inline(always)]
pub fn f32_from_f16(a: u16) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: register-only arithmetic.
        unsafe { asm!("cvt.f32.f16 {}, {};", out(reg32) r, in(reg16) a, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::cvt_f32_f16(a)
    }
}

/// `mul.rn.f32 d, a, b;` — one product, rounded to nearest even.
#[inline(always)]
pub fn mul_f32(a: f32, b: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("mul.rn.f32 {}, {}, {};", out(reg32) r, in(reg32) a, in(reg32) b, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::mul_f32(a, b)
    }
}

/// `fma.rn.f32 d, a, b, c;` — `a · b + c` computed exactly and rounded once.
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("fma.rn.f32 {}, {}, {}, {};", out(reg32) r, in(reg32) a, in(reg32) b, in(reg32) c, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::numeric::fma_f32(a, b, c)
    }
}
