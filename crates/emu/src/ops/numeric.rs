//! Arithmetic and conversion instructions: thread-local, so they only count themselves
//! and call the bit-exact models in `model::numeric`.

use super::count;
use crate::model::numeric as model;

/// `cvt.rn.f16x2.e4m3x2 d, a;` — byte 0 of `a` to the low half of `d`, byte 1 to the high.
pub fn cvt_f16x2_e4m3x2(a: u16) -> u32 {
    count("cvt.rn.f16x2.e4m3x2");
    model::cvt_f16x2_e4m3x2(a)
}

/// `cvt.rn.f16x2.f32 d, hi, lo;` — `hi` to the upper half, `lo` to the lower.
pub fn cvt_f16x2_f32(hi: f32, lo: f32) -> u32 {
    count("cvt.rn.f16x2.f32");
    model::cvt_f16x2_f32(hi, lo)
}

/// `cvt.rn.f16.f32 d, a;`
pub fn cvt_f16_f32(a: f32) -> u16 {
    count("cvt.rn.f16.f32");
    model::cvt_f16_f32(a)
}

/// `mul.rn.f16x2 d, a, b;`
pub fn mul_f16x2(a: u32, b: u32) -> u32 {
    count("mul.rn.f16x2");
    model::mul_f16x2(a, b)
}

/// `mul.rn.bf16x2 d, a, b;`
pub fn mul_bf16x2(a: u32, b: u32) -> u32 {
    count("mul.rn.bf16x2");
    model::mul_bf16x2(a, b)
}

/// `fma.rn.f16x2 d, a, b, c;`
pub fn fma_f16x2(a: u32, b: u32, c: u32) -> u32 {
    count("fma.rn.f16x2");
    model::fma_f16x2(a, b, c)
}

/// `cvt.rn.bf16x2.f32 d, hi, lo;` — `hi` to the upper half, `lo` to the lower.
pub fn cvt_bf16x2_f32(hi: f32, lo: f32) -> u32 {
    count("cvt.rn.bf16x2.f32");
    (u32::from(model::cvt_bf16_f32(hi)) << 16) | u32::from(model::cvt_bf16_f32(lo))
}

/// `cvt.f32.f16 d, a;` (exact).
pub fn cvt_f32_f16(a: u16) -> f32 {
    count("cvt.f32.f16");
    model::f16_to_f32(a)
}

/// `mul.rn.f32 d, a, b;`
pub fn mul_f32(a: f32, b: f32) -> f32 {
    count("mul.rn.f32");
    a * b
}

/// `fma.rn.f32 d, a, b, c;` — `a · b + c` rounded once.
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    count("fma.rn.f32");
    a.mul_add(b, c)
}
