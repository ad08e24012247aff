//! Bit-exact models of the numeric instructions the kernels use: conversions between e4m3, f16
//! and f32 (`cvt`), and packed half-precision multiply and fused multiply-add (`mul`, `fma` on
//! `.f16x2`).
//!
//! Conventions, from the PTX ISA:
//! * `.f16x2` (§5.2.3 "Packed Data Types") is a `.b32` holding two f16: element 0 in
//!   bits 0-15 (the "low half"), element 1 in bits 16-31 (the "high half"). The arithmetic
//!   instructions work on the two halves independently.
//! * `.rn` is IEEE 754 round-to-nearest, ties-to-even (the floating-point rounding modifiers
//!   table of §9.7.9.21 "cvt"; the same `.rn` for `mul`/`fma`).
//! * No `.ftz`: subnormal inputs and results are kept (the default for f16 arithmetic and `cvt`;
//!   §9.7.4 "Half Precision Floating-Point Instructions"). No `.sat`/`.satfinite`: an overflowing
//!   `.rn` result is an infinity.
//! * NaN results are the *canonical NaN* (the PTX ISA's term, used e.g. by `min`/`max`):
//!   [`F16_CANONICAL_NAN`] (0x7FFF) and [`F32_CANONICAL_NAN`] (0x7FFF_FFFF). The model returns
//!   it for every NaN result and never propagates payloads. That NVIDIA GPUs do the same for
//!   these instructions is the common understanding, but it was not measured for this project: a
//!   kernel that depends on NaN payload bits is outside what this model vouches for.
//!
//! Every rounding here goes through one routine, `round_to_f16`, which rounds an exact value
//! `mag * 2^exp` (an integer significand of up to 128 bits) to f16 in a single step. Products and
//! sums of f16 values are formed exactly in integers first, so `fma` is genuinely single-rounded.
//! (`half::f16::from_f64` is not used for this: on x86 with F16C it converts through f32, and its
//! software path ignores the low 32 bits of the f64 significand when rounding, so neither is one
//! correct rounding of an arbitrary f64.)

/// The f16 NaN the model returns for every NaN result.
pub const F16_CANONICAL_NAN: u16 = 0x7FFF;
/// The f32 NaN the model returns for every NaN result.
pub const F32_CANONICAL_NAN: u32 = 0x7FFF_FFFF;

const F16_INF: u16 = 0x7C00;
const F16_SIGN: u16 = 0x8000;

/// `cvt.rn.f16x2.e4m3x2 d, a` (PTX ISA §9.7.9.21 "cvt", 8-bit float sources; sm_89+).
///
/// `a` is a `.b16` holding two `.e4m3` values. Reading of the ISA text: the value converted from
/// the upper 8 bits of `a` goes to the upper half of `d`, the one from the lower 8 bits to the
/// lower half — so byte 0 → bits 0-15, byte 1 → bits 16-31. The project's hardware evidence
/// agrees: the e2m1 → e4m3 → f16 dequantization (sm90-wgmma.md §3.2) puts the even-k nibble's
/// byte in byte 0 and was checked end to end on an H100 with the lower k in the low half.
///
/// Every e4m3 value is exactly representable in f16 (3 mantissa bits ⊂ 10, exponents
/// 2^-9..2^8 ⊂ f16's normal range), so the conversion never rounds; `.rn` is required by the
/// syntax only. See [`e4m3_to_f16`] for the format.
pub fn cvt_f16x2_e4m3x2(a: u16) -> u32 {
    let [lo, hi] = a.to_le_bytes();
    (u32::from(e4m3_to_f16(hi)) << 16) | u32::from(e4m3_to_f16(lo))
}

/// One e4m3 value (OCP FP8 "E4M3FN", PTX `.e4m3`) as f16 bits.
///
/// Layout `s eeee mmm`, exponent bias 7. `e = 0` is subnormal: `m · 2^-9`. Otherwise
/// `(8 + m) · 2^(e - 10)` = `1.m · 2^(e-7)`. There are no infinities: the largest exponent is an
/// ordinary binade (max 448 = 0x7E) except `s 1111 111` (0x7F, 0xFF), which is NaN. NaN converts
/// to the canonical f16 NaN 0x7FFF (sign dropped; model choice, see the module doc). ±0 keep
/// their sign.
pub fn e4m3_to_f16(x: u8) -> u16 {
    let neg = x & 0x80 != 0;
    let e = i32::from((x >> 3) & 0xF);
    let m = u128::from(x & 0x7);
    match (e, m) {
        (15, 7) => F16_CANONICAL_NAN,
        (0, _) => round_to_f16(neg, m, -9),
        _ => round_to_f16(neg, 8 + m, e - 10),
    }
}

/// `cvt.rn.f16x2.f32 d, a, b` (PTX ISA §9.7.9.21 "cvt", `.f16x2` destination; sm_80+): the ISA
/// stores the value converted from `a` in the upper half of `d` and the one from `b` in the lower
/// half. The arguments are named for where they land: `hi` is PTX's `a`, `lo` is PTX's `b`.
/// Each half is [`cvt_f16_f32`].
pub fn cvt_f16x2_f32(hi: f32, lo: f32) -> u32 {
    (u32::from(cvt_f16_f32(hi)) << 16) | u32::from(cvt_f16_f32(lo))
}

/// `cvt.rn.f16.f32` (PTX ISA §9.7.9.21 "cvt"): round to nearest even; magnitudes at or above
/// 65520 (half-way between f16's maximum 65504 and 2^16) become ±infinity; results below the f16
/// range become subnormals or ±0 (no `.ftz`, so f32 subnormal inputs are honoured too — they all
/// round to ±0); NaN → 0x7FFF.
pub fn cvt_f16_f32(x: f32) -> u16 {
    let bits = x.to_bits();
    let neg = bits >> 31 != 0;
    let e = ((bits >> 23) & 0xFF) as i32;
    let m = u128::from(bits & 0x7F_FFFF);
    match e {
        0xFF if m != 0 => F16_CANONICAL_NAN,
        0xFF => signed(neg, F16_INF),
        // f32 subnormal: m · 2^-149.
        0 => round_to_f16(neg, m, -149),
        _ => round_to_f16(neg, m | 0x80_0000, e - 150),
    }
}

/// The NaN `cvt.rn.bf16x2.f32` writes.
pub const BF16_CANONICAL_NAN: u16 = 0x7FFF;

/// `cvt.rn.bf16.f32` (PTX ISA §9.7.9.21 "cvt", `.bf16` destination; sm_80+): round to nearest
/// even (bf16 is the upper half of an f32, so only the mantissa narrows: no new overflow or
/// underflow rules beyond the carry into the exponent); NaN → 0x7FFF. Modelled with the `half`
/// crate's conversion, independent of the kernels' own software rounding for sm_75.
pub fn cvt_bf16_f32(x: f32) -> u16 {
    if x.is_nan() { BF16_CANONICAL_NAN } else { half::bf16::from_f32(x).to_bits() }
}

/// `cvt.f32.f16` (PTX ISA §9.7.9.21 "cvt"): exact widening — every f16 (subnormals included) is
/// an f32. NaN → the canonical f32 NaN 0x7FFF_FFFF.
pub fn f16_to_f32(h: u16) -> f32 {
    match decode_f16(h) {
        F16::Nan => f32::from_bits(F32_CANONICAL_NAN),
        F16::Inf { neg } => {
            if neg {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            }
        }
        F16::Finite { neg, mag, exp } => {
            // mag < 2^11 and 2^exp with exp in -24..=5 are both exact f32 values (2^-24 is an f32
            // normal), so the product is exact.
            let pow2 = f32::from_bits(((exp + 127) as u32) << 23);
            let v = mag as f32 * pow2;
            if neg { -v } else { v }
        }
    }
}

/// `mul.rn.f16x2 d, a, b` (PTX ISA §9.7.4.3 "Half Precision Floating-Point Instructions: mul"):
/// per half, `d = a · b` rounded to nearest even; subnormals kept (no `.ftz`); overflow → ±inf.
/// IEEE special cases: NaN in → NaN out (canonical), ∞ · 0 → NaN, ∞ · x → ±∞; the sign of a zero
/// or infinite result is the XOR of the input signs.
pub fn mul_f16x2(a: u32, b: u32) -> u32 {
    map_halves2(a, b, mul_f16)
}

/// `mul.rn.bf16x2 d, a, b` (PTX ISA §9.7.4.3; sm_90, which has no `.ftz` for bf16): per
/// half, `d = a · b` rounded to nearest even, subnormal inputs and results kept (checked on
/// an H100: `scripts/probes/bf16mul.cu`); overflow → ±inf; NaN in → the canonical bf16 NaN.
///
/// Exactness of the model: a bf16 has 8 significant bits, so the product of two has at
/// most 16 and is exact in f64 (whose exponent range holds every product of two f32
/// values). A product of at least f32's smallest normal is then exact in f32 too and
/// rounds once to bf16; a smaller one is rounded once on bf16's subnormal grid (2^-133).
pub fn mul_bf16x2(a: u32, b: u32) -> u32 {
    map_halves2(a, b, mul_bf16)
}

fn mul_bf16(a: u16, b: u16) -> u16 {
    let widen = |h: u16| f64::from(f32::from_bits(u32::from(h) << 16));
    let product = widen(a) * widen(b);
    if product.is_nan() {
        return BF16_CANONICAL_NAN;
    }
    if product.abs() >= f64::from(f32::MIN_POSITIVE) || product == 0.0 {
        // Exact in f32 (or beyond its range, where both roundings give ±inf).
        return cvt_bf16_f32(product as f32);
    }
    // bf16's subnormals are multiples of 2^-133: round there once, ties to even.
    let ulps = (product * 2f64.powi(133)).round_ties_even();
    cvt_bf16_f32((ulps * 2f64.powi(-133)) as f32)
}

/// `fma.rn.f16x2 d, a, b, c` (PTX ISA §9.7.4.4 "Half Precision Floating-Point Instructions:
/// fma"): per half, `d = a · b + c` computed "to infinite precision" and rounded once, to
/// nearest even; subnormals kept; overflow → ±inf.
///
/// Exactness of the model: an f16 is an integer multiple of 2^-24 below 2^16, so the product of
/// two is an integer multiple of 2^-48 below 2^32, and the sum of a product and an f16 is an
/// integer multiple of 2^-48 below 2^33: an integer below 2^81 in units of 2^-48, which an `i128`
/// holds exactly. That exact sum is rounded once by `round_to_f16`. (An f64 sum would not always
/// be exact — the two terms can span 81 bits — and rounding f64 → f32 → f16 would round twice.)
///
/// Special cases follow IEEE 754 `fusedMultiplyAdd`: any NaN input, ∞ · 0, or ∞ + (−∞) gives
/// NaN (canonical). An exact zero sum is +0, unless both the product and `c` are −0 (then −0);
/// a nonzero sum that rounds to zero keeps its sign.
pub fn fma_f16x2(a: u32, b: u32, c: u32) -> u32 {
    let lo = fma_f16(a as u16, b as u16, c as u16);
    let hi = fma_f16((a >> 16) as u16, (b >> 16) as u16, (c >> 16) as u16);
    (u32::from(hi) << 16) | u32::from(lo)
}

/// An f16 split into the classes the arithmetic rules distinguish. A finite value is
/// `(-1)^neg · mag · 2^exp` with an integer significand `mag < 2^11`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum F16 {
    Nan,
    Inf { neg: bool },
    Finite { neg: bool, mag: u32, exp: i32 },
}

/// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Exponent field 0 is
/// zero/subnormal (`m · 2^-24`), 31 is ∞ (m = 0) or NaN, otherwise `(1024 + m) · 2^(e - 25)`.
fn decode_f16(h: u16) -> F16 {
    let neg = h & F16_SIGN != 0;
    let e = i32::from((h >> 10) & 0x1F);
    let m = u32::from(h & 0x3FF);
    match e {
        0x1F if m == 0 => F16::Inf { neg },
        0x1F => F16::Nan,
        0 => F16::Finite { neg, mag: m, exp: -24 },
        _ => F16::Finite { neg, mag: m | 0x400, exp: e - 25 },
    }
}

fn signed(neg: bool, magnitude_bits: u16) -> u16 {
    if neg { magnitude_bits | F16_SIGN } else { magnitude_bits }
}

fn map_halves2(a: u32, b: u32, f: fn(u16, u16) -> u16) -> u32 {
    let lo = f(a as u16, b as u16);
    let hi = f((a >> 16) as u16, (b >> 16) as u16);
    (u32::from(hi) << 16) | u32::from(lo)
}

fn mul_f16(a: u16, b: u16) -> u16 {
    match (decode_f16(a), decode_f16(b)) {
        (F16::Nan, _) | (_, F16::Nan) => F16_CANONICAL_NAN,
        (F16::Inf { neg: na }, F16::Inf { neg: nb }) => signed(na != nb, F16_INF),
        (F16::Inf { neg: ni }, F16::Finite { neg: nf, mag, .. })
        | (F16::Finite { neg: nf, mag, .. }, F16::Inf { neg: ni }) => {
            if mag == 0 {
                F16_CANONICAL_NAN
            } else {
                signed(ni != nf, F16_INF)
            }
        }
        (F16::Finite { neg: na, mag: ma, exp: ea }, F16::Finite { neg: nb, mag: mb, exp: eb }) => {
            round_to_f16(na != nb, u128::from(ma) * u128::from(mb), ea + eb)
        }
    }
}

/// A product of two non-NaN f16 values: `±∞`, or the exact `(-1)^neg · mag · 2^exp`.
enum Product {
    Inf { neg: bool },
    Exact { neg: bool, mag: u128, exp: i32 },
}

fn fma_f16(a: u16, b: u16, c: u16) -> u16 {
    /// Every f16 product is an integer multiple of 2^PRODUCT_ULP_EXP (2^-24 · 2^-24).
    const PRODUCT_ULP_EXP: i32 = -48;
    let product = match (decode_f16(a), decode_f16(b)) {
        (F16::Nan, _) | (_, F16::Nan) => return F16_CANONICAL_NAN,
        (F16::Inf { neg: na }, F16::Inf { neg: nb }) => Product::Inf { neg: na != nb },
        (F16::Inf { neg: ni }, F16::Finite { neg: nf, mag, .. })
        | (F16::Finite { neg: nf, mag, .. }, F16::Inf { neg: ni }) => {
            if mag == 0 {
                return F16_CANONICAL_NAN;
            }
            Product::Inf { neg: ni != nf }
        }
        (F16::Finite { neg: na, mag: ma, exp: ea }, F16::Finite { neg: nb, mag: mb, exp: eb }) => {
            Product::Exact { neg: na != nb, mag: u128::from(ma) * u128::from(mb), exp: ea + eb }
        }
    };
    let (nc, mc, ec) = match decode_f16(c) {
        F16::Nan => return F16_CANONICAL_NAN,
        F16::Inf { neg: nc } => {
            return match product {
                Product::Inf { neg: np } if np != nc => F16_CANONICAL_NAN,
                _ => signed(nc, F16_INF),
            };
        }
        F16::Finite { neg, mag, exp } => (neg, mag, exp),
    };
    let (np, mp, ep) = match product {
        Product::Inf { neg } => return signed(neg, F16_INF),
        Product::Exact { neg, mag, exp } => (neg, mag, exp),
    };
    // Both terms as exact signed integers in units of 2^-48 (shifts ≤ 58 and ≤ 53, magnitudes
    // below 2^81).
    let p = (mp as i128) << (ep - PRODUCT_ULP_EXP);
    let q = i128::from(mc) << (ec - PRODUCT_ULP_EXP);
    let sum = if np { -p } else { p } + if nc { -q } else { q };
    // IEEE 754 §6.3: an exact zero sum is +0 under round-to-nearest, except (−0) + (−0) = −0.
    let neg = if sum == 0 { np && nc && p == 0 && q == 0 } else { sum < 0 };
    round_to_f16(neg, sum.unsigned_abs(), PRODUCT_ULP_EXP)
}

/// Rounds the exact value `(-1)^neg · mag · 2^exp` to f16, to nearest, ties to even, in one step.
///
/// With the value in binade `2^e ≤ v < 2^(e+1)`, the f16 spacing there is `2^q` with
/// `q = max(e, -14) - 10` (11 significant bits for normals; fixed 2^-24 for subnormals). The
/// rounded significand `n = round(v / 2^q)` lies in `[0, 2^11]` and the encoding is
/// `((q + 24) << 10) + n` for both subnormals (q = -24) and normals — a carry of `n` to 2^11 moves
/// into the exponent field on its own, and an encoding of 0x7C00 or more is an overflow → ∞.
fn round_to_f16(neg: bool, mag: u128, exp: i32) -> u16 {
    if mag == 0 {
        return signed(neg, 0);
    }
    let e = 127 - mag.leading_zeros() as i32 + exp;
    if e > 15 {
        // v ≥ 2^16 > 65520, the overflow threshold.
        return signed(neg, F16_INF);
    }
    let q = e.max(-14) - 10;
    let n = shift_right_rne(mag, q - exp);
    let bits = (((q + 24) as u128) << 10) + n;
    signed(neg, if bits >= u128::from(F16_INF) { F16_INF } else { bits as u16 })
}

/// `round(mag / 2^s)` to nearest, ties to even; `s ≤ 0` is an exact left shift (the callers only
/// shift left by amounts that keep the result below 2^12).
fn shift_right_rne(mag: u128, s: i32) -> u128 {
    if s <= 0 {
        return mag << s.unsigned_abs();
    }
    if s > 128 {
        // mag < 2^128 ≤ 2^(s-1): below half of the unit, rounds to 0.
        return 0;
    }
    let s = s as u32;
    let (n, rem) = if s == 128 { (0, mag) } else { (mag >> s, mag & ((1u128 << s) - 1)) };
    let half = 1u128 << (s - 1);
    if rem > half || (rem == half && n & 1 == 1) { n + 1 } else { n }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// `mul.rn.bf16x2`: the bf16 W4A16 weights' product (a subnormal e2m1 code times a
    /// huge scale, exact), a rounding tie to even, a subnormal result, overflow, NaN, and
    /// the sign of a zero product; each half on its own.
    #[test]
    fn mul_bf16x2_rounds_once_and_keeps_subnormals() {
        let bf = |x: f32| cvt_bf16_f32(x);
        let pair = |hi: u16, lo: u16| (u32::from(hi) << 16) | u32::from(lo);
        let mul = |a: u16, b: u16| mul_bf16x2(u32::from(a), u32::from(b)) as u16;
        // 0.5 · 2^-126 (bits 0x0040, subnormal) times 448 · 2^119: 0.5 · 448 · 2^-7.
        assert_eq!(mul(0x0040, bf(448.0 * 2f32.powi(119))), bf(1.75));
        // (1 + 2^-7) · 1.5 = 1.5 + 1.5 ulps (bf16's ulp in [1, 2) is 2^-7): a tie between
        // 193 and 194 ulps, to the even 194, 1.5 + 2^-6.
        assert_eq!(mul(bf(1.0 + 2f32.powi(-7)), bf(1.5)), bf(1.5 + 2f32.powi(-6)));
        // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14: 130 ulps and a little, down to 1 + 2^-6.
        assert_eq!(mul(bf(1.0 + 2f32.powi(-7)), bf(1.0 + 2f32.powi(-7))), bf(1.0 + 2f32.powi(-6)));
        // Multiples of bf16's smallest subnormal (bits 0x0001, 2^-133): 1.5 and 2.5 ulps tie
        // to the even 2; half an ulp ties to zero, keeping the sign.
        assert_eq!(mul(bf(1.5), 0x0001), 0x0002);
        assert_eq!(mul(bf(2.5), 0x0001), 0x0002);
        assert_eq!(mul(bf(-0.5), 0x0001), 0x8000);
        assert_eq!(mul(bf(2f32.powi(100)), bf(2f32.powi(100))), 0x7F80);
        assert_eq!(mul(0x7FC0, bf(1.0)), BF16_CANONICAL_NAN);
        assert_eq!(mul(0x8000, bf(3.0)), 0x8000);
        assert_eq!(mul_bf16x2(pair(bf(2.0), bf(3.0)), pair(bf(-0.5), bf(0.25))), pair(bf(-1.0), bf(0.75)));
    }

    /// Small deterministic generator (xorshift64*) for the randomized checks.
    struct Rng(u64);
    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn next_u16(&mut self) -> u16 {
            (self.next_u64() >> 40) as u16
        }
    }

    fn is_f16_nan(h: u16) -> bool {
        h & 0x7C00 == 0x7C00 && h & 0x3FF != 0
    }

    /// e4m3 value from its definition, in f64 (None for NaN).
    fn e4m3_value(x: u8) -> Option<f64> {
        let sign = if x & 0x80 != 0 { -1.0 } else { 1.0 };
        let e = i32::from((x >> 3) & 0xF);
        let m = f64::from(x & 7);
        if e == 15 && x & 7 == 7 {
            return None;
        }
        Some(if e == 0 { sign * m / 8.0 * 2f64.powi(-6) } else { sign * (1.0 + m / 8.0) * 2f64.powi(e - 7) })
    }

    #[test]
    fn e4m3x2_exhaustive_against_definition() {
        let expect = |byte: u8| -> u16 {
            match e4m3_value(byte) {
                None => 0x7FFF,
                // Exactly representable, so from_f64 (whatever its internal path) is exact.
                Some(v) => f16::from_f64(v).to_bits(),
            }
        };
        for a in 0..=u16::MAX {
            let [lo, hi] = a.to_le_bytes();
            let want = (u32::from(expect(hi)) << 16) | u32::from(expect(lo));
            assert_eq!(cvt_f16x2_e4m3x2(a), want, "a = {a:#06x}");
        }
    }

    #[test]
    fn e4m3_hand_values_and_half_placement() {
        assert_eq!(e4m3_to_f16(0x38), 0x3C00); // 1.0
        assert_eq!(e4m3_to_f16(0x7E), 0x5F00); // 448 = 1.75 · 2^8
        assert_eq!(e4m3_to_f16(0x01), 0x1800); // 2^-9, an f16 normal
        assert_eq!(e4m3_to_f16(0x80), 0x8000); // -0
        assert_eq!(e4m3_to_f16(0xFF), 0x7FFF); // NaN, canonical
        assert_eq!(e4m3_to_f16(0x78), 0x5C00); // 256: e = 15 is a normal binade (no inf)
        // byte 1 → high half, byte 0 → low half.
        assert_eq!(cvt_f16x2_e4m3x2(0x3800), 0x3C00_0000);
        assert_eq!(cvt_f16x2_e4m3x2(0x0038), 0x0000_3C00);
        assert_eq!(cvt_f16x2_e4m3x2(0xB840), 0xBC00_4000); // (-1.0, 2.0)
    }

    #[test]
    fn cvt_f16x2_f32_places_first_operand_high() {
        assert_eq!(cvt_f16x2_f32(1.0, 2.0), 0x3C00_4000);
        assert_eq!(cvt_f16x2_f32(-0.0, f32::INFINITY), 0x8000_7C00);
        assert_eq!(cvt_f16x2_f32(f32::NAN, 0.5), 0x7FFF_3800);
    }

    #[test]
    fn cvt_f16_f32_ties_overflow_underflow() {
        // Ties: 1 + 2^-11 lies half-way between 1 (even) and 1 + 2^-10 (odd).
        assert_eq!(cvt_f16_f32(1.0 + 2f32.powi(-11)), 0x3C00);
        assert_eq!(cvt_f16_f32(1.0 + 3.0 * 2f32.powi(-11)), 0x3C02); // to even, upward
        assert_eq!(cvt_f16_f32(1.0 + 2f32.powi(-11) + 2f32.powi(-23)), 0x3C01);
        // Overflow threshold 65520.
        assert_eq!(cvt_f16_f32(65519.996), 0x7BFF);
        assert_eq!(cvt_f16_f32(65520.0), 0x7C00);
        assert_eq!(cvt_f16_f32(-1e9), 0xFC00);
        // Subnormal results; 2^-25 is a tie between 0 and 2^-24 → 0.
        assert_eq!(cvt_f16_f32(2f32.powi(-24)), 0x0001);
        assert_eq!(cvt_f16_f32(2f32.powi(-25)), 0x0000);
        assert_eq!(cvt_f16_f32(-(2f32.powi(-25) + 2f32.powi(-40))), 0x8001);
        assert_eq!(cvt_f16_f32(3.0 * 2f32.powi(-25)), 0x0002); // 1.5 ulp → 2
        assert_eq!(cvt_f16_f32(f32::from_bits(1)), 0x0000); // f32 subnormal
        assert_eq!(cvt_f16_f32(-f32::from_bits(1)), 0x8000);
        // Largest subnormal rounding up into the smallest normal.
        assert_eq!(cvt_f16_f32(2f32.powi(-14) - 2f32.powi(-26)), 0x0400);
        assert_eq!(cvt_f16_f32(f32::from_bits(0xFFC0_0001)), 0x7FFF);
    }

    #[test]
    fn cvt_f16_f32_matches_half_on_a_sweep() {
        // half's f32 → f16 (F16C, or its software path) is a correct RNE rounding; NaN payloads
        // differ by design, so NaNs are compared by class.
        let check = |x: f32| {
            let got = cvt_f16_f32(x);
            let want = f16::from_f32(x).to_bits();
            if x.is_nan() {
                assert_eq!(got, 0x7FFF);
            } else {
                assert_eq!(got, want, "x = {x:e} ({:#010x})", x.to_bits());
            }
        };
        for i in 0..(1u32 << 20) {
            check(f32::from_bits(i.wrapping_mul(4099)));
        }
        // Every f16 midpoint and its f32 neighbours.
        for h in 0..0x7C00u16 {
            let mid = (f64::from(f16_to_f32(h)) + f64::from(f16_to_f32(h + 1))) / 2.0;
            let mid = mid as f32; // exact: 12 significant bits
            for x in [mid, mid.next_up(), mid.next_down()] {
                check(x);
                check(-x);
            }
        }
    }

    #[test]
    fn f16_to_f32_exhaustive() {
        for h in 0..=u16::MAX {
            let got = f16_to_f32(h);
            if is_f16_nan(h) {
                assert_eq!(got.to_bits(), 0x7FFF_FFFF);
            } else {
                assert_eq!(got.to_bits(), f16::from_bits(h).to_f32().to_bits(), "{h:#06x}");
                assert_eq!(cvt_f16_f32(got), h, "round trip {h:#06x}");
            }
        }
    }

    #[test]
    fn mul_hand_cases() {
        let mul = |a: u16, b: u16| mul_f16x2(u32::from(a), u32::from(b)) as u16;
        assert_eq!(mul(0x3E00, 0x4000), 0x4200); // 1.5 · 2 = 3
        // Subnormals kept: 2^-24 · 1 = 2^-24; 2^-24 · 0.5 is a tie → 0 (even);
        // 3·2^-24 · 0.5 = 1.5 ulp → 2 ulp (even); 2^-24 · 1.5 → 2 ulp.
        assert_eq!(mul(0x0001, 0x3C00), 0x0001);
        assert_eq!(mul(0x0001, 0x3800), 0x0000);
        assert_eq!(mul(0x0003, 0x3800), 0x0002);
        assert_eq!(mul(0x0001, 0x3E00), 0x0002);
        assert_eq!(mul(0x8001, 0x3800), 0x8000); // underflow keeps the sign
        assert_eq!(mul(0x0200, 0x4000), 0x0400); // subnormal · 2 = smallest normal
        // Overflow: 65504 · 2; 65504 · (1 + 2^-10) = 65567.97 ≥ 65520.
        assert_eq!(mul(0x7BFF, 0x4000), 0x7C00);
        assert_eq!(mul(0x7BFF, 0x3C01), 0x7C00);
        assert_eq!(mul(0xFBFF, 0x4000), 0xFC00);
        // Specials.
        assert_eq!(mul(0x7E00, 0x3C00), 0x7FFF);
        assert_eq!(mul(0x7C00, 0x0000), 0x7FFF);
        assert_eq!(mul(0x8000, 0xFC00), 0x7FFF);
        assert_eq!(mul(0x7C00, 0xC000), 0xFC00);
        assert_eq!(mul(0xFC00, 0xFC00), 0x7C00);
        assert_eq!(mul(0x8000, 0x3C00), 0x8000);
        // The halves are independent.
        assert_eq!(mul_f16x2(0x3E00_7C00, 0x4000_0000), 0x4200_7FFF);
    }

    #[test]
    fn mul_matches_correctly_rounded_product() {
        // An f16 · f16 product (22 significant bits, exponent ≥ -48) is exact in f32, so
        // half's f32 → f16 rounding of the f32 product is the correctly rounded result.
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..1_000_000 {
            let (a, b) = (rng.next_u16(), rng.next_u16());
            let got = mul_f16x2(u32::from(a), u32::from(b)) as u16;
            let p = f16::from_bits(a).to_f32() * f16::from_bits(b).to_f32();
            if p.is_nan() {
                assert_eq!(got, 0x7FFF, "{a:#06x} · {b:#06x}");
            } else {
                assert_eq!(got, f16::from_f32(p).to_bits(), "{a:#06x} · {b:#06x}");
            }
        }
    }

    #[test]
    fn fma_single_rounding() {
        let fma = |a: u16, b: u16, c: u16| fma_f16x2(u32::from(a), u32::from(b), u32::from(c)) as u16;
        // (1 + 2^-10)^2 - (1 + 2^-9) = 2^-20 exactly (0x0010); rounding the product first
        // would give 0.
        assert_eq!(fma(0x3C01, 0x3C01, 0xBC02), 0x0010);
        // 3 · 341.5 = 1024.5 is a tie between 1024 and 1025: c = ±0 → 1024 (even); the
        // smallest subnormal c breaks the tie upward; a negative one downward.
        assert_eq!(fma(0x4200, 0x5D56, 0x0000), 0x6400);
        assert_eq!(fma(0x4200, 0x5D56, 0x0001), 0x6401);
        assert_eq!(fma(0x4200, 0x5D56, 0x8001), 0x6400);
        // Subnormal results: 2^-24 · 0.5 + 2^-24 = 1.5 ulp → 2 ulp.
        assert_eq!(fma(0x0001, 0x3800, 0x0001), 0x0002);
        // Overflow at 65520 (a tie that rounds to "even" = ∞); 65519 stays finite.
        assert_eq!(fma(0x7BFF, 0x3C00, 0x4C00), 0x7C00); // 65504 + 16
        assert_eq!(fma(0x7BFF, 0x3C00, 0x4B80), 0x7BFF); // 65504 + 15
        // Zero signs.
        assert_eq!(fma(0x8000, 0x3C00, 0x8000), 0x8000); // -0 + -0
        assert_eq!(fma(0x3C00, 0x3C00, 0xBC00), 0x0000); // 1 - 1 = +0
        assert_eq!(fma(0xBC00, 0x3C00, 0x3C00), 0x0000);
        assert_eq!(fma(0x8000, 0x3C00, 0x0000), 0x0000); // -0 + +0
        assert_eq!(fma(0x8001, 0x3800, 0x8000), 0x8000); // tiny negative rounds to -0
        // Specials.
        assert_eq!(fma(0x7C00, 0x0000, 0x3C00), 0x7FFF); // ∞ · 0
        assert_eq!(fma(0x7C00, 0x3C00, 0xFC00), 0x7FFF); // ∞ - ∞
        assert_eq!(fma(0x7C00, 0x3C00, 0x7C00), 0x7C00);
        assert_eq!(fma(0x7C00, 0xBC00, 0x3C00), 0xFC00);
        assert_eq!(fma(0x3C00, 0x3C00, 0xFC00), 0xFC00);
        assert_eq!(fma(0x3C00, 0x3C00, 0x7C01), 0x7FFF); // NaN c
        assert_eq!(fma(0x7BFF, 0x7BFF, 0xFBFF), 0x7C00); // huge product, finite c
        // Halves are independent.
        assert_eq!(fma_f16x2(0x3C00_7C00, 0x3C00_0000, 0x3C00_3C00), 0x4000_7FFF);
    }

    #[test]
    fn fma_matches_reference_where_f32_is_exact() {
        // Where a·b + c is exact in f64 (checked with Knuth's TwoSum: the rounding error of the
        // f64 sum is zero) and exact in f32, half's f32 → f16 rounding of it is the correctly
        // rounded fma. (a·b alone is always exact in f64.) IEEE zero-sign rules are the same in
        // f64, so signed zeros are compared too.
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        let mut checked = 0;
        for _ in 0..2_000_000 {
            let (a, b, c) = (rng.next_u16(), rng.next_u16(), rng.next_u16());
            let [fa, fb, fc] = [a, b, c].map(|h| f64::from(f16::from_bits(h).to_f32()));
            let p = fa * fb;
            let s = p + fc;
            let (bp, ap) = (s - p, s - (s - p));
            let err = (p - ap) + (fc - bp);
            if !s.is_finite() || err != 0.0 || f64::from(s as f32) != s {
                continue;
            }
            checked += 1;
            let got = fma_f16x2(u32::from(a), u32::from(b), u32::from(c)) as u16;
            let want = f16::from_f32(s as f32).to_bits();
            assert_eq!(got, want, "{a:#06x} · {b:#06x} + {c:#06x}");
        }
        assert!(checked > 100_000, "only {checked} cases checked");
    }
}
