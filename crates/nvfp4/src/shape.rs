//! Problem shapes `M x N x K [x L]` and the rules every kernel relies on.
//!
//! A [`Shape`] built by [`Shape::new`] or parsed from text is valid: every dimension is at
//! least 1, K is a multiple of [`SF_VECTOR`] (16: whole scale blocks), and every byte count
//! below fits in a `u64`. M and N are free: the blocked scale layout pads rows up to 128
//! and scale columns up to 4 on its own, and the kernels zero-fill tails of M, N and K.

use core::fmt;
use core::str::FromStr;

use crate::layout;

/// The K step of the tiled kernels: one tile of the blocked scale layout covers 4 scales =
/// 64 values of K, and the Blackwell block-scaled MMA consumes K = 64 per instruction. K
/// need not be a multiple of it: a kernel's last step zero-fills the values past K (and
/// the blocked layout's padding scales are zero).
pub const K_GRANULE: u32 = 64;

/// Values per scale factor along K; K must be a positive multiple of it.
pub const SF_VECTOR: u32 = 16;

/// A GEMM problem: `C[L][M][N]` (fp16) = `A[L][M][K] * B[L][N][K]^T` with NVFP4 operands.
///
/// The fields are public for reading; build one with [`Shape::new`] or [`str::parse`], which
/// validate it (the byte-count methods assume a valid shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Rows of A and C.
    pub m: u32,
    /// Rows of B, columns of C.
    pub n: u32,
    /// The reduction dimension: values per row of A and B.
    pub k: u32,
    /// Batch count.
    pub l: u32,
}

/// Why a shape was refused. `Display` gives a message a user can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// Not of the form `MxNxK` or `MxNxKxL` with decimal integers.
    Malformed,
    /// A dimension is zero (its letter).
    Zero(char),
    /// K is not a multiple of [`SF_VECTOR`] (the K given).
    KNotMultiple(u32),
    /// A dimension or a derived byte count does not fit (the letter, or '*' for sizes).
    TooLarge(char),
}

impl core::error::Error for ShapeError {}

impl fmt::Display for ShapeError {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ShapeError::Malformed => f.write_str(
                "expected a shape MxNxK or MxNxKxL: 3 or 4 decimal integers joined by 'x', \
                 no signs or spaces (e.g. 128x7168x16384)",
            ),
            ShapeError::Zero('L') => f.write_str("L = 0: the batch count must be at least 1"),
            ShapeError::Zero(dim) => write!(f, "{dim} = 0: every dimension must be at least 1"),
            ShapeError::KNotMultiple(k) => write!(
                f,
                "K = {k} is not a multiple of {SF_VECTOR}: NVFP4 has one scale per {SF_VECTOR} values \
                 of K; pad A and B with zero values up to K = {}",
                (k as u64).div_ceil(SF_VECTOR as u64) * SF_VECTOR as u64,
            ),
            ShapeError::TooLarge('*') => f.write_str(
                "the problem is too large: a byte count (of A, B, their blocked scales or C) \
                 does not fit in 64 bits",
            ),
            ShapeError::TooLarge(dim) => {
                write!(f, "{dim} is too large: dimensions must fit in 32 bits (at most {})", u32::MAX)
            }
        }
    }
}

impl Shape {
    /// Builds and validates a shape (L >= 1).
    ///
    /// The checks, in order: no dimension is zero (`Zero`, letters M, N, K, L), K is a multiple
    /// of [`SF_VECTOR`] (`KNotMultiple`), the byte counts of A, B, SFA, SFB and C and their
    /// sum fit in a `u64` (`TooLarge('*')`).
    #[inline]
    pub const fn new(m: u32, n: u32, k: u32, l: u32) -> Result<Shape, ShapeError> {
        if m == 0 {
            return Err(ShapeError::Zero('M'));
        }
        if n == 0 {
            return Err(ShapeError::Zero('N'));
        }
        if k == 0 {
            return Err(ShapeError::Zero('K'));
        }
        if l == 0 {
            return Err(ShapeError::Zero('L'));
        }
        if !k.is_multiple_of(SF_VECTOR) {
            return Err(ShapeError::KNotMultiple(k));
        }
        let shape = Shape { m, n, k, l };
        if shape.total_bytes_wide() > u64::MAX as u128 {
            return Err(ShapeError::TooLarge('*'));
        }
        Ok(shape)
    }

    /// A + B + SFA + SFB + C, in 128 bits where nothing can overflow (the largest term,
    /// L * M * N * 2, is below 2^97). The shape is valid when this fits in a `u64`, and then
    /// so does every term and partial sum the byte-count methods compute.
    #[inline]
    const fn total_bytes_wide(&self) -> u128 {
        let (m, n, k, l) = (self.m as u128, self.n as u128, self.k as u128, self.l as u128);
        let sfa = layout::batch_bytes(self.m, self.sf_cols()) as u128;
        let sfb = layout::batch_bytes(self.n, self.sf_cols()) as u128;
        l * (m * k / 2 + n * k / 2 + sfa + sfb + m * n * 2)
    }

    /// Scale factors per row: K / 16.
    #[inline]
    pub const fn sf_cols(&self) -> u32 {
        self.k / SF_VECTOR
    }

    /// Bytes of A (packed e2m1): L * M * K / 2.
    #[inline]
    pub const fn a_bytes(&self) -> u64 {
        self.l as u64 * self.m as u64 * (self.k as u64 / 2)
    }

    /// Bytes of B (packed e2m1): L * N * K / 2.
    #[inline]
    pub const fn b_bytes(&self) -> u64 {
        self.l as u64 * self.n as u64 * (self.k as u64 / 2)
    }

    /// Bytes of SFA in the blocked layout (rows padded to 128), all batches.
    #[inline]
    pub const fn sfa_bytes(&self) -> u64 {
        layout::batch_bytes(self.m, self.sf_cols()) * self.l as u64
    }

    /// Bytes of SFB in the blocked layout (rows padded to 128), all batches.
    #[inline]
    pub const fn sfb_bytes(&self) -> u64 {
        layout::batch_bytes(self.n, self.sf_cols()) * self.l as u64
    }

    /// Bytes of C (fp16): L * M * N * 2.
    #[inline]
    pub const fn c_bytes(&self) -> u64 {
        self.l as u64 * self.m as u64 * self.n as u64 * 2
    }

    /// What the problem must read: A + B + SFA + SFB (blocked, as stored).
    #[inline]
    pub const fn bytes_read(&self) -> u64 {
        self.a_bytes() + self.b_bytes() + self.sfa_bytes() + self.sfb_bytes()
    }

    /// Floating-point operations: 2 * L * M * N * K.
    #[inline]
    pub const fn flops(&self) -> f64 {
        2.0 * self.l as f64 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

impl FromStr for Shape {
    type Err = ShapeError;

    /// `"128x7168x16384"` or `"128x7168x16384x2"` (also accepts 'X'; no spaces).
    ///
    /// Syntax errors (`Malformed`) are reported before values that do not fit in a `u32`
    /// (`TooLarge` with the letter), then [`Shape::new`] validates the numbers.
    #[inline]
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const LETTERS: [char; 4] = ['M', 'N', 'K', 'L'];
        let parts = || s.split(['x', 'X']);
        let well_formed = parts().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let count = parts().count();
        if !well_formed || !(3..=4).contains(&count) {
            return Err(ShapeError::Malformed);
        }
        let mut dims = [1u32; 4];
        for ((dim, part), letter) in dims.iter_mut().zip(parts()).zip(LETTERS) {
            *dim = part.parse().map_err(|_| ShapeError::TooLarge(letter))?;
        }
        let [m, n, k, l] = dims;
        Shape::new(m, n, k, l)
    }
}

impl fmt::Display for Shape {
    /// `MxNxK` when L = 1, else `MxNxKxL`.
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)?;
        if self.l != 1 {
            write!(f, "x{}", self.l)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn shape(m: u32, n: u32, k: u32, l: u32) -> Shape {
        Shape { m, n, k, l }
    }

    #[test]
    fn parses_valid_shapes() {
        let cases = [
            ("128x7168x16384", shape(128, 7168, 16384, 1)),
            ("128X7168X16384", shape(128, 7168, 16384, 1)),
            ("128x4096x7168x1", shape(128, 4096, 7168, 1)),
            ("256x7168x2048x3", shape(256, 7168, 2048, 3)),
            ("1x1x64", shape(1, 1, 64, 1)),
            ("100x300X256x2", shape(100, 300, 256, 2)),
            ("0128x07168x016384", shape(128, 7168, 16384, 1)),
            ("4294967295x1x64", shape(u32::MAX, 1, 64, 1)),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<Shape>(), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn rejects_invalid_shapes() {
        use ShapeError::*;
        let cases = [
            ("", Malformed),
            ("128", Malformed),
            ("128x7168", Malformed),
            ("128x7168x", Malformed),
            ("x128x7168x16384", Malformed),
            ("128xx7168x16384", Malformed),
            ("128x7168x16384x1x1", Malformed),
            ("128x7168x16384x", Malformed),
            ("+128x7168x16384", Malformed),
            ("-128x7168x16384", Malformed),
            ("128x7168x-16384", Malformed),
            (" 128x7168x16384", Malformed),
            ("128x7168x16384 ", Malformed),
            ("128 x 7168 x 16384", Malformed),
            ("128*7168*16384", Malformed),
            ("128x7168x16384.0", Malformed),
            ("1e3x128x64", Malformed),
            ("128x٣x64", Malformed), // a non-ASCII digit
            ("99999999999x1x64x1x5", Malformed),
            ("0x128x64", Zero('M')),
            ("128x0x64", Zero('N')),
            ("128x128x0", Zero('K')),
            ("128x128x64x0", Zero('L')),
            ("0x0x0x0", Zero('M')),
            ("0x10x64", Zero('M')), // not hexadecimal: the parts are 0, 10 and 64
            ("128x7168x100", KNotMultiple(100)),
            ("128x7168x24", KNotMultiple(24)),
            ("128x7168x16392", KNotMultiple(16392)),
            ("4294967296x1x64", TooLarge('M')),
            ("1x4294967296x64", TooLarge('N')),
            ("1x1x99999999999", TooLarge('K')),
            ("1x1x64x4294967296", TooLarge('L')),
            ("4294967295x4294967295x64", TooLarge('*')),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<Shape>(), Err(want), "{text:?}");
        }
    }

    #[test]
    fn new_validates() {
        assert_eq!(Shape::new(128, 7168, 16384, 1), Ok(shape(128, 7168, 16384, 1)));
        assert_eq!(Shape::new(0, 1, 64, 1), Err(ShapeError::Zero('M')));
        assert_eq!(Shape::new(1, 0, 64, 1), Err(ShapeError::Zero('N')));
        assert_eq!(Shape::new(1, 1, 0, 1), Err(ShapeError::Zero('K')));
        assert_eq!(Shape::new(1, 1, 64, 0), Err(ShapeError::Zero('L')));
        assert_eq!(Shape::new(1, 1, 88, 1), Err(ShapeError::KNotMultiple(88)));
        // Any multiple of 16 (tensor parallelism makes K = 96 real).
        assert_eq!(Shape::new(1, 1, 96, 1), Ok(shape(1, 1, 96, 1)));
        assert_eq!(Shape::new(3, 5, 16, 2), Ok(shape(3, 5, 16, 2)));
        // The largest K that is a multiple of 16.
        let k_max = u32::MAX / 16 * 16;
        assert!(Shape::new(1, 1, k_max, 1).is_ok());
        // M * N * 2 (C) overflows although each operand fits.
        assert_eq!(Shape::new(u32::MAX, u32::MAX, 64, 1), Err(ShapeError::TooLarge('*')));
        // Only L pushes A over: 2^20 * 2^19 * 2^30 = 2^69.
        assert_eq!(Shape::new(1 << 20, 1, 1 << 20, 1 << 30), Err(ShapeError::TooLarge('*')));
        assert!(Shape::new(1 << 20, 1, 1 << 20, 1 << 20).is_ok());
        // Each term fits but the sum does not: C alone is (2^32 - 1) * (2^32 - 2) bytes.
        assert_eq!(Shape::new(u32::MAX, u32::MAX / 2, 64 * (1 << 22), 1), Err(ShapeError::TooLarge('*')));
        // Usable in constants.
        const MAIN: Result<Shape, ShapeError> = Shape::new(128, 7168, 16384, 1);
        assert!(MAIN.is_ok());
    }

    #[test]
    fn error_messages() {
        let cases = [
            (
                ShapeError::KNotMultiple(100),
                "K = 100 is not a multiple of 16: NVFP4 has one scale per 16 values of K; pad A \
                 and B with zero values up to K = 112",
            ),
            (ShapeError::Zero('N'), "N = 0: every dimension must be at least 1"),
            (ShapeError::Zero('L'), "L = 0: the batch count must be at least 1"),
            (ShapeError::TooLarge('K'), "K is too large: dimensions must fit in 32 bits (at most 4294967295)"),
            (
                ShapeError::TooLarge('*'),
                "the problem is too large: a byte count (of A, B, their blocked scales or C) \
                 does not fit in 64 bits",
            ),
            (
                ShapeError::Malformed,
                "expected a shape MxNxK or MxNxKxL: 3 or 4 decimal integers joined by 'x', \
                 no signs or spaces (e.g. 128x7168x16384)",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.to_string(), want);
        }
        // The padding suggestion never overflows.
        assert!(ShapeError::KNotMultiple(u32::MAX).to_string().ends_with("K = 4294967296"));
    }

    #[test]
    fn display_round_trips() {
        for text in ["128x7168x16384", "100x300x256x2", "1x1x64x4294967295"] {
            let s: Shape = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
        }
        assert_eq!("128x4096x7168x1".parse::<Shape>().unwrap().to_string(), "128x4096x7168");
        assert_eq!("128X4096X7168X2".parse::<Shape>().unwrap().to_string(), "128x4096x7168x2");
    }

    #[test]
    fn byte_counts_of_the_main_benchmark_shape() {
        let s: Shape = "128x7168x16384".parse().unwrap();
        assert_eq!(s.sf_cols(), 1024);
        assert_eq!(s.a_bytes(), 1_048_576);
        assert_eq!(s.b_bytes(), 58_720_256);
        assert_eq!(s.sfa_bytes(), 131_072);
        assert_eq!(s.sfb_bytes(), 7_340_032);
        assert_eq!(s.c_bytes(), 1_835_008);
        assert_eq!(s.bytes_read(), 1_048_576 + 58_720_256 + 131_072 + 7_340_032);
        // The spec's 69.1 MB includes writing C.
        assert_eq!(s.bytes_read() + s.c_bytes(), 69_074_944);
        assert_eq!(s.flops(), 30_064_771_072.0);
    }

    #[test]
    fn byte_counts_with_batches_and_padded_rows() {
        let one = Shape::new(100, 300, 256, 1).unwrap();
        let three = Shape::new(100, 300, 256, 3).unwrap();
        // 16 scales per row = 4 tiles of 512 B per 128-row block; 100 rows pad to 128,
        // 300 rows to 384.
        assert_eq!(one.sfa_bytes(), 4 * 512);
        assert_eq!(one.sfb_bytes(), 3 * 4 * 512);
        assert_eq!(one.a_bytes(), 100 * 128);
        assert_eq!(one.b_bytes(), 300 * 128);
        assert_eq!(one.c_bytes(), 100 * 300 * 2);
        assert_eq!(one.flops(), 2.0 * 100.0 * 300.0 * 256.0);
        assert_eq!(three.a_bytes(), 3 * one.a_bytes());
        assert_eq!(three.b_bytes(), 3 * one.b_bytes());
        assert_eq!(three.sfa_bytes(), 3 * one.sfa_bytes());
        assert_eq!(three.sfb_bytes(), 3 * one.sfb_bytes());
        assert_eq!(three.c_bytes(), 3 * one.c_bytes());
        assert_eq!(three.bytes_read(), 3 * one.bytes_read());
        assert_eq!(three.flops(), 3.0 * one.flops());
        // 129 rows need two row blocks.
        assert_eq!(Shape::new(129, 128, 64, 1).unwrap().sfa_bytes(), 2 * 512);
        assert_eq!(Shape::new(129, 128, 64, 1).unwrap().sfb_bytes(), 512);
    }
}
