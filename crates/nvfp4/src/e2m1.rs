//! e2m1 (FP4), the element type of A and B.
//!
//! A code is 4 bits: bit 3 is the sign, bits 2..1 the exponent (bias 1), bit 0 the mantissa.
//! The eight magnitudes are
//!
//! | code   | 0 | 1   | 2 | 3   | 4 | 5 | 6 | 7 |
//! |--------|---|-----|---|-----|---|---|---|---|
//! | value  | 0 | 0.5 | 1 | 1.5 | 2 | 3 | 4 | 6 |
//!
//! (exponent 0 is subnormal: 0 and 0.5). Codes 8..=15 are the same magnitudes negated, so
//! code 8 is -0. There is no NaN and no infinity: all 16 codes are numbers.
//!
//! Two codes share a byte: the low nibble holds the even k, the high nibble the odd k
//! (the order `cvt.rn.f16x2.e2m1x2` and the tensor cores read them in).

/// Largest magnitude.
pub const MAX: f32 = 6.0;

/// Sign bit of a code.
pub const SIGN: u8 = 0x8;

/// The magnitudes of codes 0..=7.
const MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// The magnitudes of codes 0..=7, doubled (all integers).
const DOUBLED: [i8; 8] = [0, 1, 2, 3, 4, 6, 8, 12];

/// The doubled magnitudes as an 8-byte lookup table, in two little-endian words (byte i of
/// the pair = twice the magnitude of code i): the source operands a = `[0]`, b = `[1]` of a
/// PTX `prmt` that turns a code into its doubled value with one byte lookup.
pub const DOUBLED_BYTES: [u32; 2] = {
    let d = DOUBLED;
    [
        u32::from_le_bytes([d[0] as u8, d[1] as u8, d[2] as u8, d[3] as u8]),
        u32::from_le_bytes([d[4] as u8, d[5] as u8, d[6] as u8, d[7] as u8]),
    ]
};

/// The value of a 4-bit code (only the low 4 bits of `code` are read). Code 8 gives -0.0.
#[inline]
pub const fn decode(code: u8) -> f32 {
    let magnitude = MAGNITUDES[(code & 0x7) as usize];
    if code & SIGN == 0 { magnitude } else { -magnitude }
}

/// Twice the value of a code, as an integer in -12..=12: every e2m1 value is a multiple of
/// 1/2, so dot products of doubled codes are exact integer sums (used by the CPU reference).
/// Only the low 4 bits of `code` are read; -0 gives 0.
#[inline]
pub const fn decode_doubled(code: u8) -> i8 {
    let magnitude = DOUBLED[(code & 0x7) as usize];
    if code & SIGN == 0 { magnitude } else { -magnitude }
}

/// The code of `value` if it is exactly representable (-0.0 gives 8), else `None`
/// (NaN and the infinities included).
#[inline]
pub fn encode_exact(value: f32) -> Option<u8> {
    let sign = if value.is_sign_negative() { SIGN } else { 0 };
    let magnitude = value.abs();
    let code = MAGNITUDES.iter().position(|&m| m == magnitude)?;
    Some(code as u8 | sign)
}

/// The two codes of a packed byte: (even k = low nibble, odd k = high nibble).
#[inline]
pub const fn unpack(byte: u8) -> (u8, u8) {
    (byte & 0xF, byte >> 4)
}

/// Packs (even k, odd k) into one byte (only the low 4 bits of each are read).
#[inline]
pub const fn pack(even: u8, odd: u8) -> u8 {
    (even & 0xF) | (odd << 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 16 values, written out by hand.
    const TABLE: [f32; 16] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];

    #[test]
    fn doubled_bytes_are_the_doubled_magnitudes() {
        let bytes = [DOUBLED_BYTES[0].to_le_bytes(), DOUBLED_BYTES[1].to_le_bytes()].concat();
        for code in 0..8u8 {
            assert_eq!(bytes[code as usize] as f32, 2.0 * decode(code), "code {code}");
        }
    }

    #[test]
    fn decode_all_codes() {
        for (code, &want) in TABLE.iter().enumerate() {
            let got = decode(code as u8);
            assert_eq!(got.to_bits(), want.to_bits(), "code {code}");
            // Bits above the nibble are ignored.
            assert_eq!(decode(code as u8 | 0xF0).to_bits(), want.to_bits());
        }
    }

    #[test]
    fn code_8_is_negative_zero() {
        let v = decode(8);
        assert_eq!(v, 0.0);
        assert!(v.is_sign_negative());
        assert_eq!(8 & SIGN, SIGN);
        assert_eq!(encode_exact(-0.0), Some(8));
        assert_eq!(encode_exact(0.0), Some(0));
        assert_eq!(decode_doubled(8), 0);
    }

    #[test]
    fn decode_doubled_is_twice_decode() {
        for code in 0..16u8 {
            assert_eq!(f32::from(decode_doubled(code)), 2.0 * decode(code), "code {code}");
        }
        assert_eq!(decode_doubled(7), 12);
        assert_eq!(decode_doubled(15), -12);
    }

    #[test]
    fn encode_exact_round_trips() {
        for code in 0..16u8 {
            assert_eq!(encode_exact(decode(code)), Some(code), "code {code}");
        }
        assert_eq!(decode(encode_exact(MAX).unwrap()), MAX);
    }

    #[test]
    fn encode_exact_rejects_other_values() {
        for v in [
            0.25,
            -0.25,
            0.75,
            2.5,
            5.0,
            -5.0,
            7.0,
            8.0,
            12.0,
            1e-30,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert_eq!(encode_exact(v), None, "{v}");
        }
    }

    #[test]
    fn pack_unpack_round_trip() {
        for byte in 0..=255u8 {
            let (even, odd) = unpack(byte);
            assert!(even < 16 && odd < 16);
            assert_eq!(even, byte & 0xF, "the low nibble is the even k");
            assert_eq!(pack(even, odd), byte);
        }
        for even in 0..16u8 {
            for odd in 0..16u8 {
                assert_eq!(unpack(pack(even, odd)), (even, odd));
            }
        }
        assert_eq!(pack(0x1F, 0xF2), 0x2F, "only the low nibbles are read");
    }
}
