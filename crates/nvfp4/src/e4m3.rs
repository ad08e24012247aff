//! e4m3fn (FP8), the type of the scale factors.
//!
//! A code is 8 bits: bit 7 the sign, bits 6..3 the exponent (bias 7), bits 2..0 the mantissa.
//!
//! - exponent 1..=15: `2^(e-7) * (1 + m/8)`, from 2^-6 up to 448 (`0x7E`);
//! - exponent 0: subnormal, `2^-6 * m/8 = 2^-9 * m`, so 0 and 2^-9..=7 * 2^-9;
//! - `0x7F` and `0xFF` (exponent 15, mantissa 7) are NaN: the "fn" variant has **no
//!   infinities** and spends only this one pattern per sign on NaN;
//! - `0x80` is -0.
//!
//! Every e4m3 value is exactly an f32 (and an f16), so decoding is exact; encoding rounds to
//! nearest, ties to even, like PyTorch's `tensor.to(torch.float8_e4m3fn)`.

/// Largest finite magnitude (`0x7E`).
pub const MAX: f32 = 448.0;
/// Smallest positive subnormal, 2^-9 (`0x01`).
pub const MIN_SUBNORMAL: f32 = 1.0 / 512.0;
/// The positive NaN code (`0xFF` is the negative one).
pub const NAN: u8 = 0x7F;

/// f32 exponent bias minus e4m3 exponent bias: an e4m3 exponent field e is f32 field e + 120.
const EXPONENT_OFFSET: u32 = 127 - 7;
/// f32 mantissa bits dropped when keeping e4m3's 3.
const MANTISSA_SHIFT: u32 = 23 - 3;
/// f32 bits of 2^-6, the smallest normal e4m3 magnitude.
const MIN_NORMAL_BITS: u32 = (EXPONENT_OFFSET + 1) << 23;
/// f32 bits of 464, the midpoint between 448 and the first magnitude past it (480, which
/// would be code 0x7F, NaN). It rounds to 448 (ties to even); anything above it is NaN.
const OVERFLOW_BITS: u32 = 464.0f32.to_bits();

/// True for the two NaN codes 0x7F and 0xFF.
#[inline]
pub const fn is_nan(bits: u8) -> bool {
    bits & 0x7F == NAN
}

/// The value of a code, exactly (every e4m3 value is an f32), NaN for 0x7F/0xFF.
#[inline]
pub const fn decode(bits: u8) -> f32 {
    let sign = ((bits & 0x80) as u32) << 24;
    let exponent = ((bits >> 3) & 0xF) as u32;
    let mantissa = (bits & 0x7) as u32;
    let magnitude = if is_nan(bits) {
        f32::NAN
    } else if exponent == 0 {
        // Subnormal: m * 2^-9, exact in f32.
        mantissa as f32 * MIN_SUBNORMAL
    } else {
        // Normal: rebias the exponent, left-align the mantissa.
        f32::from_bits((exponent + EXPONENT_OFFSET) << 23 | mantissa << MANTISSA_SHIFT)
    };
    f32::from_bits(magnitude.to_bits() | sign)
}

/// Rounds an f32 to the nearest e4m3fn code, ties to even, as PyTorch's
/// `tensor.to(torch.float8_e4m3fn)` does: magnitudes that round above 448 become NaN
/// (there is no infinity), NaN stays NaN, the sign of zero (and of NaN) is kept.
///
/// "Round above 448" means magnitudes **greater than** 464: 464 is the midpoint between
/// 448 (`0x7E`, even mantissa) and 480 (what `0x7F` would be, odd mantissa), so ties to
/// even gives 448 (this is also what PyTorch's `c10::Float8_e4m3fn` computes: its NaN
/// threshold is 480 and [464, 480) goes through round-to-nearest-even, 464 landing on
/// 0x7E and everything above on 0x7F). Infinities become NaN.
#[inline]
pub const fn encode(value: f32) -> u8 {
    let bits = value.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let magnitude = bits & 0x7FFF_FFFF;
    let code = if magnitude > OVERFLOW_BITS {
        // Past 464, infinities and NaN (whose bit patterns are larger than any finite one).
        NAN as u32
    } else if magnitude >= MIN_NORMAL_BITS {
        // Normal: rebias the exponent and round the 23-bit mantissa to 3 bits. A carry out of
        // the mantissa correctly bumps the exponent (1.111|1 * 2^e rounds to 2^(e+1)).
        round_shift(magnitude - (EXPONENT_OFFSET << 23), MANTISSA_SHIFT)
    } else {
        // Subnormal (or zero): the code is round(|value| * 2^9). Write |value| as
        // M * 2^(e - 150) with the 24-bit significand M, so |value| * 2^9 = M >> (141 - e).
        // A result of 8 is code 0x08 = 2^-6, the smallest normal: the encoding is continuous.
        let exponent = magnitude >> 23;
        let shift = 141 - exponent;
        if exponent == 0 || shift > 24 {
            // Below 2^-10, half the smallest subnormal: rounds to zero. (2^-10 itself has
            // shift 24 and is a tie, which goes to the even 0 in round_shift.)
            0
        } else {
            round_shift((magnitude & 0x7F_FFFF) | 0x80_0000, shift)
        }
    };
    code as u8 | sign
}

/// `x / 2^shift` rounded to nearest, ties to even (`1 <= shift <= 31`).
#[inline]
const fn round_shift(x: u32, shift: u32) -> u32 {
    let quotient = x >> shift;
    let remainder = x & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let round_up = remainder > half || (remainder == half && quotient & 1 == 1);
    quotient + round_up as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An independent decoder: sign, exponent and mantissa read with arithmetic, the power of
    /// two built by repeated multiplication.
    fn reference(code: u8) -> f32 {
        let negative = code >= 128;
        let e = i32::from((code % 128) / 8);
        let m = f64::from(code % 8);
        if e == 15 && m == 7.0 {
            return f32::NAN;
        }
        // value = 2^(max(e,1) - 7) * (e>0 ? 1 + m/8 : m/8)
        let mut scale = 1.0f64;
        for _ in 0..(7 - e.max(1)).max(0) {
            scale /= 2.0;
        }
        for _ in 0..(e.max(1) - 7).max(0) {
            scale *= 2.0;
        }
        let significand = if e == 0 { m / 8.0 } else { 1.0 + m / 8.0 };
        let v = (scale * significand) as f32;
        if negative { -v } else { v }
    }

    /// PyTorch's conversion (`c10/util/Float8_e4m3fn.h`, `fp8e4m3fn_from_fp32_value`),
    /// rewritten: its subnormal path lets the f32 adder round by adding 2^14, its normal path
    /// adds a rounding bias of 0x7FFFF plus the mantissa's last kept bit.
    fn pytorch(value: f32) -> u8 {
        const NAN_FROM: u32 = 1087 << 20; // 480.0
        const DENORM_MAGIC: u32 = 141 << 23; // 2^14
        let bits = value.to_bits();
        let sign = ((bits >> 24) & 0x80) as u8;
        let f = bits & 0x7FFF_FFFF;
        let code = if f >= NAN_FROM {
            0x7F
        } else if f < 121 << 23 {
            let sum = f32::from_bits(f) + f32::from_bits(DENORM_MAGIC);
            sum.to_bits().wrapping_sub(DENORM_MAGIC) as u8
        } else {
            let odd = (f >> 20) & 1;
            let rebiased = f.wrapping_add(((7u32).wrapping_sub(127)) << 23).wrapping_add(0x7FFFF).wrapping_add(odd);
            (rebiased >> 20) as u8
        };
        code | sign
    }

    #[test]
    fn decode_all_codes_matches_reference() {
        for code in 0..=255u8 {
            let got = decode(code);
            let want = reference(code);
            if want.is_nan() {
                assert!(got.is_nan(), "code {code:#04x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "code {code:#04x}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn nan_codes_and_special_values() {
        for code in 0..=255u8 {
            assert_eq!(decode(code).is_nan(), code == 0x7F || code == 0xFF, "{code:#04x}");
            assert_eq!(is_nan(code), code == 0x7F || code == 0xFF, "{code:#04x}");
        }
        assert!(decode(0x80) == 0.0 && decode(0x80).is_sign_negative());
        assert!(decode(0x00) == 0.0 && decode(0x00).is_sign_positive());
        assert_eq!(decode(0x7E), MAX);
        assert_eq!(decode(0xFE), -MAX);
        assert_eq!(decode(0x01), MIN_SUBNORMAL);
        assert_eq!(decode(0x07), 7.0 / 512.0);
        assert_eq!(decode(0x08), 1.0 / 64.0);
        assert_eq!(decode(0x38), 1.0);
        assert_eq!(decode(0x3B), 1.375);
    }

    #[test]
    fn encode_inverts_decode() {
        for code in 0..=255u8 {
            if !is_nan(code) {
                assert_eq!(encode(decode(code)), code, "code {code:#04x}");
            }
        }
    }

    /// Codes 0..=0x7E in order are increasing magnitudes, so adjacent pairs are neighbours.
    #[test]
    fn midpoints_round_to_even() {
        for low in 0..0x7Eu8 {
            let high = low + 1;
            let (a, b) = (decode(low), decode(high));
            let mid = (a + b) / 2.0; // exact: both have 4 significant bits
            assert!(a < mid && mid < b);
            let even = if low % 2 == 0 { low } else { high };
            assert_eq!(encode(mid), even, "midpoint of {low:#04x} and {high:#04x}");
            assert_eq!(encode(-mid), even | 0x80);
            let below = f32::from_bits(mid.to_bits() - 1);
            let above = f32::from_bits(mid.to_bits() + 1);
            assert_eq!(encode(below), low, "just below the midpoint of {low:#04x}");
            assert_eq!(encode(above), high, "just above the midpoint of {low:#04x}");
        }
    }

    /// 464 is the midpoint between 448 (0x7E, mantissa 110, even) and 480 (0x7F's bit
    /// pattern, mantissa 111, odd). Round to nearest even picks 448; PyTorch agrees (its NaN
    /// threshold is 480 and below that it rounds to nearest even, landing 464 on 0x7E).
    /// Everything above 464 would round to 0x7F's pattern, which is NaN: there is no
    /// saturation in `.to(float8_e4m3fn)`.
    #[test]
    fn overflow_becomes_nan_past_464() {
        let just_above = |v: f32| f32::from_bits(v.to_bits() + 1);
        for v in [448.0, just_above(448.0), 450.0, 460.0, 463.99, 464.0] {
            assert_eq!(encode(v), 0x7E, "{v}");
            assert_eq!(encode(-v), 0xFE, "{v}");
        }
        for v in [just_above(464.0), 470.0, 479.99, 480.0, 1000.0, 1e30, f32::MAX] {
            assert_eq!(encode(v), 0x7F, "{v}");
            assert_eq!(encode(-v), 0xFF, "{v}");
        }
        assert_eq!(encode(f32::INFINITY), 0x7F);
        assert_eq!(encode(f32::NEG_INFINITY), 0xFF);
        assert!(is_nan(encode(f32::NAN)));
        assert!(is_nan(encode(-f32::NAN)));
    }

    #[test]
    fn tiny_values_round_to_signed_zero() {
        let half_min = MIN_SUBNORMAL / 2.0; // 2^-10: the tie between 0 and 2^-9
        for v in [
            f32::from_bits(1),
            f32::MIN_POSITIVE,
            1e-20,
            half_min / 2.0,
            f32::from_bits(half_min.to_bits() - 1),
            half_min,
        ] {
            assert_eq!(encode(v), 0x00, "{v}");
            assert_eq!(encode(-v), 0x80, "{v}");
        }
        assert_eq!(encode(f32::from_bits(half_min.to_bits() + 1)), 0x01);
        assert_eq!(encode(0.0), 0x00);
        assert_eq!(encode(-0.0), 0x80);
        // 1.5 * 2^-9 ties to 2 * 2^-9 (even), 2.5 * 2^-9 to 2 * 2^-9.
        assert_eq!(encode(1.5 * MIN_SUBNORMAL), 0x02);
        assert_eq!(encode(2.5 * MIN_SUBNORMAL), 0x02);
        // 7.5 * 2^-9 ties between 0x07 and 0x08 (2^-6): 0x08 is even.
        assert_eq!(encode(7.5 * MIN_SUBNORMAL), 0x08);
    }

    #[test]
    fn encode_matches_pytorch() {
        // Every f32 bit pattern in the range where e4m3 has codes and around its edges
        // ([2^-12, 2^10) in magnitude, both signs), then a sparse sweep of all patterns.
        for magnitude in (115u32 << 23)..(137u32 << 23) {
            for bits in [magnitude, magnitude | 0x8000_0000] {
                let v = f32::from_bits(bits);
                assert_eq!(encode(v), pytorch(v), "{v:e} ({bits:#010x})");
            }
        }
        for bits in (0..=u32::MAX).step_by(4093) {
            let v = f32::from_bits(bits);
            assert_eq!(encode(v), pytorch(v), "{v:e} ({bits:#010x})");
        }
    }
}
