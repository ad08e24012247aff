//! Conversions and packed half-precision arithmetic (PTX ISA 9.7.9.21 `cvt`,
//! 9.7.4 half-precision instructions).

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
