//! Compares a kernel's C with the reference, by the benchmark's rule and in ulps of C's
//! type (fp16 or bf16).
//!
//! The pass rule is the benchmark's (`torch.allclose`-style, rtol = atol = 1e-3): an
//! element passes when `|got - want| <= ATOL + RTOL * |want|`, NaN must meet NaN (any
//! payload) and an infinity must meet the same infinity. That rule is loose: a kernel that
//! accumulates exactly and rounds once reproduces the reference bit for bit, so the report
//! also gives the worst distance in ulps and whether the whole output is bit-exact.
//!
//! [`POISON`] (fp16; [`OutDtype::poison`] for bf16) is the bit pattern written into C
//! before every run, so that an element the kernel never wrote is recognised by
//! [`unwritten`] (and fails [`compare`], the reference never being NaN with generated
//! data). It is a NaN with payload 1, which no computation
//! on our inputs produces: generated scales are never NaN, and where a user's NaN scale
//! does make C NaN, the reference writes the canonical 0x7E00 and hardware conversions
//! of a NaN write a canonical NaN (0x7E00 or 0x7FFF), never this payload.

use std::fmt;

use half::f16;
use nvfp4::Shape;
use nvfp4::epilogue::OutDtype;
use rayon::prelude::*;

use crate::problem::Output;

/// Relative tolerance of the pass rule (the benchmark's).
pub const RTOL: f64 = 1e-3;
/// Absolute tolerance of the pass rule (the benchmark's).
pub const ATOL: f64 = 1e-3;

/// The fill of an fp16 C before a run: a quiet NaN with payload 1 (0x7E01), see the
/// module docs (a bf16 C gets 0x7FC1, [`OutDtype::poison`]).
pub const POISON: f16 = f16::from_bits(OutDtype::F16.poison());

/// Elements per parallel work item.
const CHUNK: usize = 1 << 16;

/// One failing element: where it is and both values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mismatch {
    pub l: u32,
    pub m: u32,
    pub n: u32,
    pub dtype: OutDtype,
    /// The bits of both values, in `dtype`.
    pub got: u16,
    pub want: u16,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "C[l={}][m={}][n={}] = {} ({:#06x}), expected {} ({:#06x})",
            self.l,
            self.m,
            self.n,
            self.dtype.to_f32(self.got),
            self.got,
            self.dtype.to_f32(self.want),
            self.want
        )
    }
}

/// The outcome of comparing a whole C with the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Elements compared: L * M * N.
    pub elements: u64,
    /// Elements that fail the pass rule with neither side NaN (an infinity that does
    /// not meet the same infinity included).
    pub mismatches: u64,
    /// Elements where exactly one side is NaN (an unwritten [`POISON`] element included).
    pub nan_mismatches: u64,
    /// Largest `|got - want|` over the elements where neither is NaN (0 when an infinity
    /// meets the same one; +Inf when an infinity meets anything else).
    pub max_abs_err: f64,
    /// Largest `|got - want| / |want|` over the elements whose `want` is finite and
    /// non-zero and whose `got` is not NaN.
    pub max_rel_err: f64,
    /// Largest distance in fp16 ulps over the elements where neither is NaN: the
    /// difference of the bit patterns as ordered integers (+0 and -0 are the same point).
    pub max_ulps: u32,
    /// The first failing element, of either kind, in `[l][m][n]` order.
    pub first_mismatch: Option<Mismatch>,
    /// Every element equal bit for bit, counting +0 = -0 and any two NaNs as equal.
    pub bit_exact: bool,
}

impl Comparison {
    /// The benchmark's verdict: no element fails the rule.
    pub fn passed(&self) -> bool {
        self.mismatches == 0 && self.nan_mismatches == 0
    }

    /// The comparison of no elements, the identity of [`Comparison::merge`].
    fn empty() -> Self {
        Comparison {
            elements: 0,
            mismatches: 0,
            nan_mismatches: 0,
            max_abs_err: 0.0,
            max_rel_err: 0.0,
            max_ulps: 0,
            first_mismatch: None,
            bit_exact: true,
        }
    }

    /// Combines the comparisons of two disjoint parts of C.
    fn merge(self, other: Self) -> Self {
        let order = |m: &Mismatch| (m.l, m.m, m.n);
        let first_mismatch = match (self.first_mismatch, other.first_mismatch) {
            (Some(a), Some(b)) => Some(if order(&a) <= order(&b) { a } else { b }),
            (a, b) => a.or(b),
        };
        Comparison {
            elements: self.elements + other.elements,
            mismatches: self.mismatches + other.mismatches,
            nan_mismatches: self.nan_mismatches + other.nan_mismatches,
            max_abs_err: self.max_abs_err.max(other.max_abs_err),
            max_rel_err: self.max_rel_err.max(other.max_rel_err),
            max_ulps: self.max_ulps.max(other.max_ulps),
            first_mismatch,
            bit_exact: self.bit_exact && other.bit_exact,
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed() { "PASS" } else { "FAIL" };
        write!(
            f,
            "{verdict}: {} of {} elements fail (NaN mismatches: {}), max abs err {:.3e}, \
             max rel err {:.3e}, max {} ulp{}",
            self.mismatches + self.nan_mismatches,
            self.elements,
            self.nan_mismatches,
            self.max_abs_err,
            self.max_rel_err,
            self.max_ulps,
            if self.max_ulps == 1 { "" } else { "s" },
        )?;
        if self.bit_exact {
            f.write_str(", bit-exact")?;
        }
        if let Some(first) = &self.first_mismatch {
            write!(f, "; first: {first}")?;
        }
        Ok(())
    }
}

/// Compares `got` with `want`, both C as `[L][M][N]` row-major.
///
/// Preconditions: both hold exactly L * M * N elements of the same type; panics otherwise.
pub fn compare(shape: Shape, got: &Output, want: &Output) -> Comparison {
    let elements = u64::from(shape.l) * u64::from(shape.m) * u64::from(shape.n);
    assert_eq!(got.len() as u64, elements, "`got` does not hold C of {shape}");
    assert_eq!(want.len() as u64, elements, "`want` does not hold C of {shape}");
    assert_eq!(got.dtype, want.dtype, "`got` and `want` have different types");
    let dtype = got.dtype;
    let (m, n) = (shape.m as usize, shape.n as usize);
    got.bits
        .par_chunks(CHUNK)
        .zip(want.bits.par_chunks(CHUNK))
        .enumerate()
        .map(|(chunk, (got, want))| {
            let mut c = Comparison::empty();
            c.elements = got.len() as u64;
            for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
                let (fails, nan_fail) = compare_element(&mut c, dtype, g, w);
                if fails {
                    if nan_fail {
                        c.nan_mismatches += 1;
                    } else {
                        c.mismatches += 1;
                    }
                    if c.first_mismatch.is_none() {
                        let index = chunk * CHUNK + i;
                        c.first_mismatch = Some(Mismatch {
                            l: (index / (m * n)) as u32,
                            m: (index / n % m) as u32,
                            n: (index % n) as u32,
                            dtype,
                            got: g,
                            want: w,
                        });
                    }
                }
            }
            c
        })
        .reduce(Comparison::empty, Comparison::merge)
}

/// Folds one element into `c`'s maxima and exactness; returns (fails, because of NaN).
fn compare_element(c: &mut Comparison, dtype: OutDtype, got: u16, want: u16) -> (bool, bool) {
    let (g, w) = (f64::from(dtype.to_f32(got)), f64::from(dtype.to_f32(want)));
    match (g.is_nan(), w.is_nan()) {
        (true, true) => return (false, false),
        (true, false) | (false, true) => {
            c.bit_exact = false;
            return (true, true);
        }
        (false, false) => {}
    }
    let ulps = ulp_distance(got, want);
    c.max_ulps = c.max_ulps.max(ulps);
    c.bit_exact &= ulps == 0;
    // `g == w` first so that an infinity meeting itself is no error (Inf - Inf is NaN).
    let abs = if g == w { 0.0 } else { (g - w).abs() };
    c.max_abs_err = c.max_abs_err.max(abs);
    if w.is_finite() && w != 0.0 {
        c.max_rel_err = c.max_rel_err.max(abs / w.abs());
    }
    let passes = if g.is_infinite() || w.is_infinite() { g == w } else { abs <= ATOL + RTOL * w.abs() };
    (!passes, false)
}

/// The distance between two non-NaN fp16 (or two bf16) values in ulps: their bit
/// patterns mapped to ordered integers (negative values mirrored below zero, so -0 and +0
/// meet at 0). Both types are sign-magnitude with the sign in bit 15.
fn ulp_distance(a: u16, b: u16) -> u32 {
    let ordered = |bits: u16| {
        let magnitude = i32::from(bits & 0x7FFF);
        if bits & 0x8000 != 0 { -magnitude } else { magnitude }
    };
    ordered(a).abs_diff(ordered(b))
}

/// Elements of C that still hold exactly the poison bits of its type ([`POISON`] for
/// fp16): never written by the kernel.
pub fn unwritten(c: &Output) -> u64 {
    let poison = c.dtype.poison();
    c.bits.par_chunks(CHUNK).map(|chunk| chunk.iter().filter(|&&x| x == poison).count() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: u32, n: u32, l: u32) -> Shape {
        Shape::new(m, n, 64, l).expect("test shape is valid")
    }

    fn h(bits: u16) -> f16 {
        f16::from_bits(bits)
    }

    /// Compares fp16 values.
    fn cmp(s: Shape, got: &[f16], want: &[f16]) -> Comparison {
        compare(s, &Output::from_f16(got), &Output::from_f16(want))
    }

    /// Compares one element (a 1x1x64 problem).
    fn one(got: f16, want: f16) -> Comparison {
        cmp(shape(1, 1, 1), &[got], &[want])
    }

    fn ulps(a: f16, b: f16) -> u32 {
        ulp_distance(a.to_bits(), b.to_bits())
    }

    #[test]
    fn exact_match_is_bit_exact() {
        let want: Vec<f16> = (0..3 * 5 * 7).map(|i| f16::from_f32(i as f32 - 50.0)).collect();
        let c = cmp(shape(5, 7, 3), &want, &want);
        assert_eq!(c.elements, 105);
        assert!(c.passed() && c.bit_exact);
        assert_eq!((c.mismatches, c.nan_mismatches, c.max_ulps), (0, 0, 0));
        assert_eq!((c.max_abs_err, c.max_rel_err), (0.0, 0.0));
        assert_eq!(c.first_mismatch, None);
        assert!(c.to_string().starts_with("PASS") && c.to_string().contains("bit-exact"));
    }

    #[test]
    fn signed_zeros_are_equal() {
        let c = one(f16::NEG_ZERO, f16::ZERO);
        assert!(c.passed() && c.bit_exact);
        assert_eq!(c.max_ulps, 0);
    }

    #[test]
    fn nan_meets_nan_whatever_the_payload() {
        let c = one(h(0x7FFF), f16::NAN);
        assert!(c.passed() && c.bit_exact);
        assert_eq!(c.max_ulps, 0);
    }

    #[test]
    fn nan_against_a_number_fails_both_ways() {
        for (got, want) in [(f16::NAN, f16::ONE), (f16::ONE, f16::NAN), (POISON, f16::ZERO)] {
            let c = one(got, want);
            assert!(!c.passed() && !c.bit_exact);
            assert_eq!((c.mismatches, c.nan_mismatches), (0, 1));
            assert_eq!((c.max_abs_err, c.max_ulps), (0.0, 0));
        }
    }

    #[test]
    fn infinities_must_match_exactly() {
        let c = one(f16::INFINITY, f16::INFINITY);
        assert!(c.passed() && c.bit_exact);
        assert_eq!(c.max_abs_err, 0.0);
        for (got, want) in [(f16::INFINITY, f16::NEG_INFINITY), (f16::MAX, f16::INFINITY), (f16::INFINITY, f16::MAX)] {
            let c = one(got, want);
            assert_eq!((c.mismatches, c.nan_mismatches), (1, 0), "{got} vs {want}");
            assert_eq!(c.max_abs_err, f64::INFINITY);
        }
        // A finite want: relative error is measured; an infinite want: it is not.
        assert_eq!(one(f16::INFINITY, f16::MAX).max_rel_err, f64::INFINITY);
        assert_eq!(one(f16::MAX, f16::INFINITY).max_rel_err, 0.0);
    }

    #[test]
    fn tolerance_boundaries() {
        let ulp_at_one = 2f64.powi(-10);
        // want 1: tolerance 0.002. Two ulps (0.00195) pass, three (0.00293) fail.
        assert!(one(f16::from_f64(1.0 + 2.0 * ulp_at_one), f16::ONE).passed());
        assert!(!one(f16::from_f64(1.0 + 3.0 * ulp_at_one), f16::ONE).passed());
        assert!(!one(f16::from_f64(1.0 - 3.0 * ulp_at_one), f16::ONE).passed());
        // want 0: tolerance is ATOL alone. 2^-10 = 0.000977 passes, 0x1420 = 0.001007 fails.
        assert!(one(h(0x1400), f16::ZERO).passed());
        assert!(!one(h(0x1420), f16::ZERO).passed());
        // want 1000: tolerance 1.001, spacing 0.5. 1001 passes, 1001.5 fails.
        let want = f16::from_f32(1000.0);
        assert!(one(f16::from_f32(1001.0), want).passed());
        assert!(!one(f16::from_f32(1001.5), want).passed());
        let c = one(f16::from_f32(1001.5), want);
        assert_eq!(c.max_abs_err, 1.5);
        assert_eq!(c.max_rel_err, 1.5 / 1000.0);
        assert_eq!(c.max_ulps, 3);
    }

    #[test]
    fn ulps_across_zero_and_exponents() {
        // The smallest subnormals on either side of zero are 2 ulps apart.
        assert_eq!(ulps(h(0x0001), h(0x8001)), 2);
        assert_eq!(ulps(f16::ZERO, h(0x8001)), 1);
        // The largest value below 2 (0x3FFF) and 2 (0x4000) are adjacent.
        assert_eq!(ulps(h(0x3FFF), f16::from_f32(2.0)), 1);
        // 1 and 2 are one exponent (1024 ulps) apart; -1 and 1 twice 0x3C00.
        assert_eq!(ulps(f16::ONE, f16::from_f32(2.0)), 1024);
        assert_eq!(ulps(f16::NEG_ONE, f16::ONE), 2 * 0x3C00);
        assert_eq!(ulps(f16::MAX, f16::INFINITY), 1);
        assert_eq!(ulps(f16::NEG_INFINITY, f16::INFINITY), 2 * 0x7C00);
        // Through compare: max over elements, NaN pairs excluded.
        let want = [f16::ONE, f16::NAN, f16::ZERO];
        let got = [f16::from_f32(2.0), f16::NAN, h(0x8003)];
        assert_eq!(cmp(shape(1, 3, 1), &got, &want).max_ulps, 1024);
    }

    #[test]
    fn first_mismatch_is_the_first_in_order_and_located() {
        // L = 2, M = 300, N = 300: 180000 elements, several parallel chunks.
        let s = shape(300, 300, 2);
        let want = vec![f16::ONE; 180_000];
        let mut got = want.clone();
        let at = |l: usize, m: usize, n: usize| (l * 300 + m) * 300 + n;
        got[at(1, 250, 7)] = f16::from_f32(5.0);
        got[at(1, 2, 299)] = POISON;
        got[at(0, 299, 3)] = f16::from_f32(1.5);
        let c = cmp(s, &got, &want);
        assert_eq!((c.mismatches, c.nan_mismatches), (2, 1));
        assert_eq!(
            c.first_mismatch,
            Some(Mismatch { l: 0, m: 299, n: 3, dtype: OutDtype::F16, got: 0x3E00, want: 0x3C00 })
        );
        assert_eq!(c.max_abs_err, 4.0);
        let text = c.to_string();
        assert!(text.starts_with("FAIL: 3 of 180000 elements fail"), "{text}");
        assert!(text.contains("C[l=0][m=299][n=3] = 1.5 (0x3e00), expected 1 (0x3c00)"), "{text}");
    }

    #[test]
    fn unwritten_counts_exact_poison_only() {
        let mut c = vec![f16::ZERO; 70_000];
        c[3] = POISON;
        c[69_999] = POISON;
        c[5] = f16::NAN;
        c[6] = h(0x7E02);
        assert_eq!(unwritten(&Output::from_f16(&c)), 2);
        assert!(POISON.is_nan());
    }

    #[test]
    fn bf16_is_compared_in_bf16() {
        let s = shape(1, 3, 1);
        let bf = |bits: Vec<u16>| Output { dtype: OutDtype::Bf16, bits };
        // 1.0, 1 + 2^-7 (one bf16 ulp), NaN (any payload meets any).
        let want = bf(vec![0x3F80, 0x3F80, 0x7FC0]);
        let got = bf(vec![0x3F80, 0x3F81, 0x7FFF]);
        let c = compare(s, &got, &want);
        assert_eq!(c.max_ulps, 1);
        assert!(!c.bit_exact);
        // 2^-7 = 0.0078 is beyond 1e-3 + 1e-3 * 1: a failure, reported in bf16 values.
        assert_eq!(c.mismatches, 1);
        assert!(c.to_string().contains("C[l=0][m=0][n=1] = 1.0078125 (0x3f81), expected 1 (0x3f80)"), "{c}");
        assert_eq!(unwritten(&bf(vec![0x7FC1, 0x7FC0, 0x7E01])), 1);
    }

    #[test]
    #[should_panic(expected = "does not hold C")]
    fn wrong_length_panics() {
        cmp(shape(2, 2, 1), &[f16::ZERO; 3], &[f16::ZERO; 4]);
    }
}
