//! What happens to the fp32 accumulator on its way out: `C = round(alpha · acc + bias)`.
//!
//! NVFP4 checkpoints carry, besides the per-16 e4m3 scales, one fp32 "global scale" per
//! tensor. Inference stacks multiply the two decode-direction global scales into one
//! `alpha` and ask for `C = alpha · (A·Bᵀ) + bias` in bf16 or fp16. Every kernel applies
//! that in fp32, in one fixed order, so the CPU reference can reproduce it bit for bit:
//!
//! ```text
//! no bias:    v = acc · alpha            (mul.rn.f32: one rounding)
//! with bias:  v = fma(acc, alpha, bias)  (fma.rn.f32: one rounding; bias read exactly as f32)
//! C = round_to_nearest_even(v)           (to fp16 or bf16)
//! ```
//!
//! With `alpha = 1` and no bias, `acc · 1 = acc` exactly (the sign of a zero included), so
//! the output is the kernels' original fp16 `C` bit for bit.

/// The element type of C.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum OutDtype {
    /// IEEE binary16: 5 exponent bits, 10 mantissa bits, max 65504.
    #[default]
    F16 = 0,
    /// bfloat16: the upper half of an f32 (8 exponent bits, 7 mantissa bits).
    Bf16 = 1,
}

impl OutDtype {
    /// The code a kernel receives (`GemmArgs::out_dtype`).
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The dtype of a kernel argument code; `None` for a code no kernel knows.
    pub const fn from_code(code: u32) -> Option<OutDtype> {
        match code {
            0 => Some(OutDtype::F16),
            1 => Some(OutDtype::Bf16),
            _ => None,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            OutDtype::F16 => "f16",
            OutDtype::Bf16 => "bf16",
        }
    }

    /// A quiet NaN with payload 1 in this type: the fill written into C before a run, so an
    /// element a kernel never wrote is recognisable (no conversion produces this payload).
    pub const fn poison(self) -> u16 {
        match self {
            OutDtype::F16 => 0x7E01,
            OutDtype::Bf16 => 0x7FC1,
        }
    }

    /// The value of `bits` as an f32, exactly (both types are subsets of f32).
    pub fn to_f32(self, bits: u16) -> f32 {
        match self {
            OutDtype::F16 => f16_to_f32(bits),
            OutDtype::Bf16 => bf16_to_f32(bits),
        }
    }
}

/// A bf16 value as f32: its bits are the f32's upper half.
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// `x` rounded to bf16, to nearest, ties to even; NaN becomes the canonical 0x7FFF, as
/// `cvt.rn.bf16.f32` writes it. Overflow rounds to ±Inf as the carry into the exponent
/// does by itself.
#[inline(always)]
pub fn bf16_from_f32(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return BF16_CANONICAL_NAN;
    }
    // Adding 0x7FFF plus the lowest kept bit rounds the dropped half to nearest even.
    let lowest_kept = (bits >> 16) & 1;
    (bits.wrapping_add(0x7FFF + lowest_kept) >> 16) as u16
}

/// The NaN the GPU's bf16 conversions write.
pub const BF16_CANONICAL_NAN: u16 = 0x7FFF;

/// An fp16 value as f32, exactly (subnormals included; NaN stays NaN).
pub fn f16_to_f32(bits: u16) -> f32 {
    const F16_MANTISSA_BITS: u32 = 10;
    const F16_EXPONENT_MASK: u32 = 0x1F;
    const F16_MANTISSA_MASK: u32 = 0x3FF;
    const SMALLEST_SUBNORMAL: f32 = 1.0 / (1u32 << 24) as f32; // 2^-24
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = (bits as u32 >> F16_MANTISSA_BITS) & F16_EXPONENT_MASK;
    let mantissa = bits as u32 & F16_MANTISSA_MASK;
    match exponent {
        0 => sign * mantissa as f32 * SMALLEST_SUBNORMAL,
        F16_EXPONENT_MASK if mantissa == 0 => sign * f32::INFINITY,
        F16_EXPONENT_MASK => f32::NAN,
        _ => {
            // Rebias 15 → 127 and widen the mantissa 10 → 23 bits.
            let f32_bits = ((bits as u32 & 0x8000) << 16) | ((exponent + 112) << 23) | (mantissa << 13);
            f32::from_bits(f32_bits)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for d in [OutDtype::F16, OutDtype::Bf16] {
            assert_eq!(OutDtype::from_code(d.code()), Some(d));
        }
        assert_eq!(OutDtype::from_code(2), None);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1.
        assert_eq!(bf16_from_f32(1.0 + 1.0 / 256.0), 0x3F80);
        // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to the even one.
        assert_eq!(bf16_from_f32(1.0 + 3.0 / 256.0), 0x3F82);
        // Just above the tie rounds up.
        assert_eq!(bf16_from_f32(f32::from_bits(0x3F80_8001)), 0x3F81);
        assert_eq!(bf16_from_f32(-2.0), 0xC000);
        assert_eq!(bf16_from_f32(-0.0), 0x8000);
        // The largest f32 rounds to infinity; infinities and NaN stay what they are.
        assert_eq!(bf16_from_f32(f32::MAX), 0x7F80);
        assert_eq!(bf16_from_f32(f32::NEG_INFINITY), 0xFF80);
        assert_eq!(bf16_from_f32(f32::NAN), BF16_CANONICAL_NAN);
    }

    #[test]
    fn bf16_round_trip_is_exact_on_every_bf16() {
        for bits in 0..=u16::MAX {
            let x = bf16_to_f32(bits);
            if x.is_nan() {
                continue;
            }
            assert_eq!(bf16_from_f32(x), bits);
        }
    }

    #[test]
    fn f16_decodes_exactly() {
        assert_eq!(f16_to_f32(0x3C00), 1.0);
        assert_eq!(f16_to_f32(0xC000), -2.0);
        assert_eq!(f16_to_f32(0x7BFF), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 1.0 / 16_777_216.0);
        assert_eq!(f16_to_f32(0x03FF), 1023.0 / 16_777_216.0);
        assert_eq!(f16_to_f32(0x0400), 1.0 / 16384.0);
        assert_eq!(f16_to_f32(0x7C00), f32::INFINITY);
        assert!(f16_to_f32(0x7E01).is_nan());
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn poison_is_nan_in_its_type() {
        assert!(OutDtype::F16.to_f32(OutDtype::F16.poison()).is_nan());
        assert!(OutDtype::Bf16.to_f32(OutDtype::Bf16.poison()).is_nan());
    }
}
