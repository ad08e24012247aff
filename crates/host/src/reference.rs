//! The exact CPU reference: C rounded once, correctly, from the exact sum.
//!
//! # Exactness
//!
//! Write every value as an integer multiple of a power of two:
//!
//! - an e2m1 value is a multiple of 1/2, so its double is an integer `d` in `-12..=12`
//!   ([`e2m1::decode_doubled`]);
//! - a finite e4m3 value is a multiple of 2^-9 (the smallest subnormal), so 512 times it
//!   is an integer of at most 4 significant bits, `|s| <= 448 * 512 = 229376`.
//!
//! One 16-value block then contributes `D * s_a * s_b` units of 2^-20, where
//! `D = sum d_a * d_b` is an integer with `|D| <= 16 * 144 = 2304`: every term of C is an
//! integer multiple of 2^-20, and C itself is the exact integer sum of the terms. The
//! reference computes that integer (an `i128`; it needs at most about 47 + log2(K/16)
//! bits) and rounds it **once** to fp16, to nearest, ties to even (`fixed_to_f16`).
//! There is no other rounding anywhere, so the result is *the* correctly rounded C, the
//! one a kernel that accumulates exactly and rounds once must produce bit for bit.
//!
//! Two traps this avoids. Accumulating the terms in `f64` is not exact in general: with
//! wide scales a term can be 2304/4 * 448^2 ~ 2^27 and another 2^-20, and a sum over K =
//! 16384 needs about 57 bits. And `half::f16::from_f64` does not round correctly: it goes
//! through `f32` where the CPU has F16C (two roundings) and otherwise ignores the low 32
//! bits of the `f64` mantissa, so `2049 + 2^-20` becomes 2048 instead of 2050 (see the
//! tests).
//!
//! # NaN
//!
//! A NaN scale (0x7F or 0xFF) makes its block's term NaN even when the block's values are
//! all zero (NaN * 0 = NaN), and every block is summed, so `C[l][m][n]` is NaN exactly when
//! row m of SFA or row n of SFB (of batch l) holds a NaN. The reference writes the
//! canonical quiet NaN 0x7E00. e4m3fn has no infinities, so C is never an infinity by
//! propagation; it is +-Inf when the exact sum rounds beyond 65504 (|C| >= 65520).
//!
//! # Speed
//!
//! [`reference()`] decodes A once per batch, and each rayon task one tile of 16 rows of B,
//! into `i16` doubled values laid out in pairs of k (`[K/2][row][2]`) with their scales
//! as `f32` (`[K/16][row]`). The task sweeps A two rows at a time: the 2 x 16 block sums
//! of a tile of C stay in eight SSE2 registers, fed by `pmaddwd` (8 multiply-adds per
//! instruction; the `sse2` module says why it is written by hand, and a plain-Rust twin
//! serves other architectures and the tests). A block's term `D * (s_a * s_b)` is exact
//! in `f32` (at most 12 + 4 + 4 significant bits, far inside the exponent range); up to
//! 64 terms are summed exactly in an `f64` (every partial sum is a multiple of 2^-18
//! below 2^35, so it fits in 53 bits), then moved exactly into the `i128` total. On two
//! cores, 128 x 7168 x 16384 takes under a second.

use half::f16;
use nvfp4::{e2m1, e4m3, layout};
use rayon::prelude::*;

use crate::problem::{AFormat, Epilogue, Output, Problem, canonical_nan};

/// Rows of A per tile: each B value loaded serves this many rows of C.
const A_TILE: usize = 2;
/// Rows of B per tile: the vector lanes (16 `i32` sums = four SSE2 registers per row of A).
const B_TILE: usize = 16;
/// Values per scale block (K / sf_cols).
const BLOCK: usize = nvfp4::shape::SF_VECTOR as usize;
/// Blocks summed in an `f64` before the partial sum moves to the `i128` total: with
/// `|term| <= 2304 * 448^2 < 2^29` units of 2^-18, 64 terms stay below 2^35 units of
/// 2^-18, i.e. below 2^53 units: every partial sum is exact.
const FLUSH_BLOCKS: usize = 64;
/// The fixed-point unit of C is 2^-FRAC_BITS.
const FRAC_BITS: i32 = 20;

/// C = A * B^T for every batch, as `[L][M][N]` in the problem's output type, through the
/// problem's epilogue ([`reference_with`]).
///
/// Precondition: `p`'s buffers have the lengths its shape gives (`a_bytes`, `b_bytes`,
/// `sfa_bytes`, `sfb_bytes`, and N values of bias if it has one); panics otherwise.
pub fn reference(p: &Problem) -> Output {
    Output { dtype: p.epilogue.out, bits: reference_with(p, &p.epilogue) }
}

/// C = round(alpha * (A * B^T) + bias) for every batch, `[L][M][N]` as bits of `e.out`.
///
/// With the identity epilogue (alpha 1, no bias, fp16) each element is correctly rounded
/// from the exact sum (see the module documentation). Otherwise the kernels' fp32 order of
/// operations ([`nvfp4::epilogue`]) is reproduced: the exact sum rounded once to f32 (what
/// an exact f32 accumulator holds), times alpha in f32, or one fused multiply-add with the
/// bias, then one rounding to fp16 or bf16.
///
/// Preconditions: as for [`reference()`], with `e`'s bias in place of the problem's.
pub fn reference_with(p: &Problem, e: &Epilogue) -> Vec<u16> {
    check_lengths(p);
    if let Some(bias) = &e.bias {
        assert_eq!(bias.len(), p.shape.n as usize, "the bias must hold N values");
    }
    if p.a_format.is_16bit() {
        return reference_w4a16(p, e);
    }
    let finish = |total: Option<i128>, col: usize| -> u16 {
        match total {
            None => canonical_nan(e.out),
            Some(total) if e.is_identity() => fixed_to_f16(total).to_bits(),
            Some(total) => e.apply(fixed_to_f32(total), col),
        }
    };
    let shape = p.shape;
    let (m, n, l) = (shape.m as usize, shape.n as usize, shape.l as usize);
    let sf_cols = shape.sf_cols();
    let half_k = shape.k as usize / 2;
    let sfa_batch = layout::batch_bytes(shape.m, sf_cols) as usize;
    let sfb_batch = layout::batch_bytes(shape.n, sf_cols) as usize;
    let table = doubled_pairs();

    let mut c = vec![0u16; l * m * n];
    for (batch, c) in c.chunks_exact_mut(m * n).enumerate() {
        let a = Operand {
            packed: &p.a[batch * m * half_k..][..m * half_k],
            blocked: &p.sfa[batch * sfa_batch..][..sfa_batch],
            rows: m,
            sf_cols,
        };
        let b = Operand {
            packed: &p.b[batch * n * half_k..][..n * half_k],
            blocked: &p.sfb[batch * sfb_batch..][..sfb_batch],
            rows: n,
            sf_cols,
        };
        let (a_nan, b_nan) = (a.nan_rows(), b.nan_rows());
        // A is decoded once, tile after tile; each task decodes its own tile of B.
        let a_tiles = m.div_ceil(A_TILE);
        let mut a_vals = vec![0i16; a_tiles * a.tile_vals::<A_TILE>()];
        let mut a_scales = vec![0f32; a_tiles * a.tile_scales::<A_TILE>()];
        a_vals
            .par_chunks_mut(a.tile_vals::<A_TILE>())
            .zip(a_scales.par_chunks_mut(a.tile_scales::<A_TILE>()))
            .enumerate()
            .for_each(|(tile, (vals, scales))| a.decode_tile::<A_TILE>(tile, &table, vals, scales));

        // C transposed, [n][m] with n padded to whole tiles: one contiguous chunk per B tile.
        let mut c_t = vec![0u16; n.div_ceil(B_TILE) * B_TILE * m];
        c_t.par_chunks_mut(B_TILE * m).enumerate().for_each(|(b_tile, c_t)| {
            let mut b_vals = vec![0i16; b.tile_vals::<B_TILE>()];
            let mut b_scales = vec![0f32; b.tile_scales::<B_TILE>()];
            b.decode_tile::<B_TILE>(b_tile, &table, &mut b_vals, &mut b_scales);
            let a_tiles =
                a_vals.chunks_exact(a.tile_vals::<A_TILE>()).zip(a_scales.chunks_exact(a.tile_scales::<A_TILE>()));
            for (a_tile, (a_vals, a_scales)) in a_tiles.enumerate() {
                let totals = tile_sums(a_vals, a_scales, &b_vals, &b_scales);
                for (i, totals) in totals.iter().enumerate() {
                    let row = a_tile * A_TILE + i;
                    if row >= m {
                        break;
                    }
                    for (j, &total) in totals.iter().enumerate() {
                        let col = b_tile * B_TILE + j;
                        if col >= n {
                            break;
                        }
                        c_t[j * m + row] = finish((!(a_nan[row] || b_nan[col])).then_some(total), col);
                    }
                }
            }
        });
        c.par_chunks_mut(n).enumerate().for_each(|(row, c_row)| {
            for (col, out) in c_row.iter_mut().enumerate() {
                *out = c_t[col * m + row];
            }
        });
    }
    c
}

/// The exact value of `C[l][m][n]` before the fp16 rounding, as the nearest `f64` (the exact
/// sum may need more than 53 bits; this is its only rounding). NaN when a scale of row m
/// of SFA or row n of SFB is NaN. A plain loop over K, independent of [`reference()`]'s
/// fast path: used by the tests and to report what an element should have been.
///
/// Preconditions: as for [`reference()`], and `l < L`, `m < M`, `n < N`.
pub fn reference_element(p: &Problem, l: u32, m: u32, n: u32) -> f64 {
    match element_fixed(p, l, m, n) {
        Some(total) => fixed_to_f64(total),
        None => f64::NAN,
    }
}

/// `C[l][m][n]` exactly, in units of 2^-20; `None` for NaN.
fn element_fixed(p: &Problem, l: u32, m: u32, n: u32) -> Option<i128> {
    check_lengths(p);
    let shape = p.shape;
    assert!(l < shape.l && m < shape.m && n < shape.n, "element ({l}, {m}, {n}) is outside {shape}");
    let sf_cols = shape.sf_cols();
    let half_k = shape.k as usize / 2;
    let a_row = &p.a[(l as usize * shape.m as usize + m as usize) * half_k..][..half_k];
    let b_row = &p.b[(l as usize * shape.n as usize + n as usize) * half_k..][..half_k];
    let sfa = &p.sfa[(u64::from(l) * layout::batch_bytes(shape.m, sf_cols)) as usize..];
    let sfb = &p.sfb[(u64::from(l) * layout::batch_bytes(shape.n, sf_cols)) as usize..];

    let doubled = |code: u8| i64::from(e2m1::decode_doubled(code));
    let mut total = 0i128;
    for (j, (a_block, b_block)) in a_row.chunks_exact(BLOCK / 2).zip(b_row.chunks_exact(BLOCK / 2)).enumerate() {
        let sa = sfa[layout::offset(m, j as u32, sf_cols) as usize];
        let sb = sfb[layout::offset(n, j as u32, sf_cols) as usize];
        if e4m3::is_nan(sa) || e4m3::is_nan(sb) {
            return None;
        }
        let dot: i64 = a_block
            .iter()
            .zip(b_block)
            .map(|(&x, &y)| {
                let ((x0, x1), (y0, y1)) = (e2m1::unpack(x), e2m1::unpack(y));
                doubled(x0) * doubled(y0) + doubled(x1) * doubled(y1)
            })
            .sum();
        total += i128::from(dot * scale_units(sa) * scale_units(sb));
    }
    Some(total)
}

/// A finite e4m3 value in units of 2^-9: an exact integer, `|units| <= 229376`.
fn scale_units(bits: u8) -> i64 {
    (e4m3::decode(bits) * 512.0) as i64
}

/// Panics unless `p`'s buffers have the lengths its shape gives (the documented
/// precondition of every function that takes a [`Problem`]).
pub(crate) fn check_lengths(p: &Problem) {
    let s = p.shape;
    assert_eq!(p.a.len() as u64, p.a_format.a_bytes(s.m, s.k, s.l), "A has the wrong length for {s}");
    assert_eq!(p.b.len() as u64, s.b_bytes(), "B has the wrong length for {s}");
    let sfa = if p.a_format == AFormat::Nvfp4 { s.sfa_bytes() } else { 0 };
    assert_eq!(p.sfa.len() as u64, sfa, "SFA has the wrong length for {s}");
    assert_eq!(p.sfb.len() as u64, s.sfb_bytes(), "SFB has the wrong length for {s}");
}

/// The W4A16 reference: A fp16 or bf16 values, B NVFP4. Exact as the NVFP4 one: a weight
/// e2m1·e4m3 is an integer multiple of 2^-10 below 2^12 (doubled e2m1 times e4m3 in units
/// of 2^-9), and each row of A is taken in units of its finest value's quantum (2^-24 at
/// most for fp16; bf16 reaches 2^-133), so every product is an integer and C's row sums
/// are exact in an `i128` whenever the row's values span fewer than ~2^70 (any fp16 row;
/// bf16 rows beyond that, and rows with a non-finite value, take the f64 sum: NaN or
/// infinity for non-finite inputs, the nearest f64 of the sum otherwise). A plain loop (a
/// test oracle for small shapes, rows in parallel).
fn reference_w4a16(p: &Problem, e: &Epilogue) -> Vec<u16> {
    const WEIGHT_FRAC: i32 = 10; // weights in units of 2^-10
    const WEIGHT_BITS: i32 = 22; // |weight| < 6 * 448 * 2^10 < 2^22
    const F16_FRACTION_BITS: i32 = 10; // the most of fp16 (bf16: 7)
    const I128_BITS: i32 = 126; // leave the sign bit and one of headroom
    // One unit, 2^-frac, must be a normal f32 for `fixed_to_f32_at`.
    const F32_MIN_NORMAL_EXP: i32 = -126;
    const F32_MAX_EXP: i32 = 127;
    let s = p.shape;
    let (m, n, k) = (s.m as usize, s.n as usize, s.k as usize);
    let sf_cols = s.sf_cols();
    let sfb_batch = layout::batch_bytes(s.n, sf_cols) as usize;
    let k_bits = 64 - (k as u64).leading_zeros() as i32;
    let mut c = vec![0u16; s.l as usize * m * n];
    c.par_chunks_mut(n).enumerate().for_each(|(row_index, c_row)| {
        let l = row_index / m;
        let a: Vec<f64> = p.a[(row_index * k) * 2..][..k * 2]
            .chunks_exact(2)
            .map(|b| {
                let bits = u16::from_le_bytes([b[0], b[1]]);
                match p.a_format {
                    AFormat::Bf16 => f64::from(half::bf16::from_bits(bits)),
                    _ => f64::from(f16::from_bits(bits)),
                }
            })
            .collect();
        let finite = a.iter().all(|v| v.is_finite());
        // Binary exponent of |v| (v a nonzero f64: always normal).
        let exponent = |v: f64| ((v.to_bits() >> 52) & 0x7FF) as i32 - 1023;
        let nonzero = || a.iter().filter(|v| **v != 0.0 && v.is_finite()).map(|&v| exponent(v));
        // The row in units of 2^unit: every value an integer below 2^(top - unit + 1).
        let unit = nonzero().min().map_or(0, |e| e - F16_FRACTION_BITS);
        let top = nonzero().max().unwrap_or(0);
        let frac = WEIGHT_FRAC - unit;
        let exact = finite
            && (top - unit + 1) + WEIGHT_BITS + k_bits <= I128_BITS
            && (F32_MIN_NORMAL_EXP..=F32_MAX_EXP).contains(&-frac);
        let units: Vec<i128> = match exact {
            true => a.iter().map(|&v| (v * 2f64.powi(-unit)) as i128).collect(),
            false => Vec::new(),
        };
        for (col, out) in c_row.iter_mut().enumerate() {
            let b_row = &p.b[(l * n + col) * k / 2..][..k / 2];
            let sfb = &p.sfb[l * sfb_batch..];
            let mut total = 0i128;
            let mut wide = 0f64;
            let mut nan = false;
            for (j, block) in b_row.chunks_exact(BLOCK / 2).enumerate() {
                let sb = sfb[layout::offset(col as u32, j as u32, sf_cols) as usize];
                nan |= e4m3::is_nan(sb);
                let scale = if e4m3::is_nan(sb) { 0 } else { scale_units(sb) };
                for (i, &byte) in block.iter().enumerate() {
                    let (even, odd) = e2m1::unpack(byte);
                    for (h, code) in [even, odd].into_iter().enumerate() {
                        let kk = j * BLOCK + 2 * i + h;
                        let w = i64::from(e2m1::decode_doubled(code)) * scale; // units of 2^-10
                        if exact {
                            total += units[kk] * i128::from(w);
                        } else {
                            wide += a[kk] * w as f64 / 1024.0;
                        }
                    }
                }
            }
            *out = if nan {
                canonical_nan(e.out)
            } else if !exact {
                e.apply(wide as f32, col)
            } else if e.is_identity() {
                fixed_to_f16_at(total, frac).to_bits()
            } else {
                e.apply(fixed_to_f32_at(total, frac), col)
            };
        }
    });
    c
}

/// The doubled values of both nibbles of every byte: `[even k, odd k]`.
fn doubled_pairs() -> [[i16; 2]; 256] {
    std::array::from_fn(|byte| {
        let (even, odd) = e2m1::unpack(byte as u8);
        [even, odd].map(|code| i16::from(e2m1::decode_doubled(code)))
    })
}

/// One operand (A or B) of one batch, as stored in the [`Problem`].
struct Operand<'p> {
    /// Packed values, `[rows][K/2]`.
    packed: &'p [u8],
    /// Blocked scales of this batch.
    blocked: &'p [u8],
    rows: usize,
    sf_cols: u32,
}

impl Operand<'_> {
    /// `i16` values in a decoded tile of `T` rows: `[K/2][T][2]`.
    fn tile_vals<const T: usize>(&self) -> usize {
        self.sf_cols as usize * BLOCK * T
    }

    /// `f32` scales in a decoded tile of `T` rows: `[K/16][T]`.
    fn tile_scales<const T: usize>(&self) -> usize {
        self.sf_cols as usize * T
    }

    /// Decodes rows `[tile * T, tile * T + T)` in pairs of k: `vals[k/2][row][k%2]` is the
    /// doubled value (the two values of a packed byte stay neighbours, the operand shape of
    /// SSE2 `pmaddwd`), `scales[block][row]` the scale; 0 for a NaN scale and for rows past
    /// the end.
    fn decode_tile<const T: usize>(&self, tile: usize, table: &[[i16; 2]; 256], vals: &mut [i16], scales: &mut [f32]) {
        let half_k = self.sf_cols as usize * BLOCK / 2;
        vals.fill(0);
        scales.fill(0.0);
        for i in 0..T.min(self.rows - tile * T) {
            let row = tile * T + i;
            let packed = &self.packed[row * half_k..][..half_k];
            for (pair, &byte) in packed.iter().enumerate() {
                let [even, odd] = table[usize::from(byte)];
                vals[(pair * T + i) * 2..][..2].copy_from_slice(&[even, odd]);
            }
            for block in 0..self.sf_cols {
                let bits = self.blocked[layout::offset(row as u32, block, self.sf_cols) as usize];
                scales[block as usize * T + i] = if e4m3::is_nan(bits) { 0.0 } else { e4m3::decode(bits) };
            }
        }
    }

    /// Whether each row has a NaN scale: its row or column of C is then NaN.
    fn nan_rows(&self) -> Vec<bool> {
        (0..self.rows)
            .into_par_iter()
            .map(|row| {
                (0..self.sf_cols)
                    .any(|j| e4m3::is_nan(self.blocked[layout::offset(row as u32, j, self.sf_cols) as usize]))
            })
            .collect()
    }
}

/// The exact sums of an `A_TILE x B_TILE` tile of C, in units of 2^-20, from a decoded
/// tile of each operand (see [`Operand::decode_tile`]).
fn tile_sums(a_vals: &[i16], a_scales: &[f32], b_vals: &[i16], b_scales: &[f32]) -> [[i128; B_TILE]; A_TILE] {
    // Partial sums are in units of 2^-18 (the scale product's unit; D's factor 4 makes 2^-20).
    const TO_UNITS: f64 = (1u64 << 18) as f64;
    let mut totals = [[0i128; B_TILE]; A_TILE];
    let chunks = a_vals
        .chunks(FLUSH_BLOCKS * BLOCK * A_TILE)
        .zip(a_scales.chunks(FLUSH_BLOCKS * A_TILE))
        .zip(b_vals.chunks(FLUSH_BLOCKS * BLOCK * B_TILE))
        .zip(b_scales.chunks(FLUSH_BLOCKS * B_TILE));
    for (((a_vals, a_scales), b_vals), b_scales) in chunks {
        // SAFETY: SSE2 is part of the x86-64 baseline: every x86-64 CPU has it.
        #[cfg(target_arch = "x86_64")]
        let partial = unsafe { sse2::partial_sums(a_vals, a_scales, b_vals, b_scales) };
        #[cfg(not(target_arch = "x86_64"))]
        let partial = partial_sums(a_vals, a_scales, b_vals, b_scales);
        for (totals, partial) in totals.iter_mut().zip(&partial) {
            for (total, &partial) in totals.iter_mut().zip(partial) {
                // An integer below 2^53 (see FLUSH_BLOCKS): the conversion is exact.
                *total += i128::from((partial * TO_UNITS) as i64);
            }
        }
    }
    totals
}

/// The sums over at most [`FLUSH_BLOCKS`] blocks of `D * (s_a * s_b)`, in units of 2^-18,
/// for an `A_TILE x B_TILE` tile: plain Rust, the definition `sse2::partial_sums` must
/// match bit for bit (and the path on other architectures).
///
/// Every step is exact: `|D| <= 2304` is an `i32` sum of products of doubled values, `s_a
/// * s_b` has 8 significant bits and `D * (s_a * s_b)` 20, all in `f32`'s normal range;
/// the `f64` sums stay below 2^53 units (see [`FLUSH_BLOCKS`]), so their order is free.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn partial_sums(a_vals: &[i16], a_scales: &[f32], b_vals: &[i16], b_scales: &[f32]) -> [[f64; B_TILE]; A_TILE] {
    let mut partial = [[0f64; B_TILE]; A_TILE];
    let blocks = a_vals
        .chunks_exact(BLOCK * A_TILE)
        .zip(a_scales.chunks_exact(A_TILE))
        .zip(b_vals.chunks_exact(BLOCK * B_TILE))
        .zip(b_scales.chunks_exact(B_TILE));
    for (((a_block, sa), b_block), sb) in blocks {
        // [k/2][row] pairs of (even k, odd k) values.
        let (a_pairs, _) = a_block.as_chunks::<2>();
        let (b_pairs, _) = b_block.as_chunks::<2>();
        for (i, (partial, &sa)) in partial.iter_mut().zip(sa).enumerate() {
            for (j, (partial, &sb)) in partial.iter_mut().zip(sb).enumerate() {
                let dot: i32 = (0..BLOCK / 2)
                    .map(|kp| {
                        let (a, b) = (a_pairs[kp * A_TILE + i], b_pairs[kp * B_TILE + j]);
                        i32::from(a[0]) * i32::from(b[0]) + i32::from(a[1]) * i32::from(b[1])
                    })
                    .sum();
                *partial += f64::from(dot as f32 * (sa * sb));
            }
        }
    }
    partial
}

/// `partial_sums` in explicit SSE2, which every x86-64 CPU has (no runtime detection).
///
/// Written by hand because LLVM's auto-vectorizer takes the wrong loop here: it vectorizes
/// along k with gathers instead of across the 16 rows of B. Per pair of k, the two values
/// of a row of A are broadcast as one 32-bit lane and `pmaddwd` multiplies them with the
/// pairs of 4 rows of B at once, summing each pair: 8 multiply-adds per instruction, with
/// the 2 x 16 block sums held in 8 registers.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_add_pd, _mm_cvtepi32_ps, _mm_cvtps_pd, _mm_cvtsd_f64, _mm_madd_epi16,
        _mm_movehl_ps, _mm_mul_ps, _mm_set_epi16, _mm_set_epi64x, _mm_set1_ps, _mm_setr_ps, _mm_setzero_pd,
        _mm_setzero_si128, _mm_shuffle_epi32, _mm_unpackhi_pd,
    };

    use super::{A_TILE, B_TILE, BLOCK};

    // The register blocking below is written for these tile sizes.
    const _: () = assert!(A_TILE == 2 && B_TILE == 16);

    /// 8 consecutive `i16` as a vector (LLVM folds the element loads into one load).
    #[inline]
    #[target_feature(enable = "sse2")]
    fn load_i16x8(v: &[i16; 8]) -> __m128i {
        _mm_set_epi16(v[7], v[6], v[5], v[4], v[3], v[2], v[1], v[0])
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn partial_sums(
        a_vals: &[i16],
        a_scales: &[f32],
        b_vals: &[i16],
        b_scales: &[f32],
    ) -> [[f64; B_TILE]; A_TILE] {
        let mut partial = [[_mm_setzero_pd(); B_TILE / 2]; A_TILE];
        let blocks = a_vals
            .chunks_exact(BLOCK * A_TILE)
            .zip(a_scales.chunks_exact(A_TILE))
            .zip(b_vals.chunks_exact(BLOCK * B_TILE))
            .zip(b_scales.chunks_exact(B_TILE));
        for (((a_block, sa), b_block), sb) in blocks {
            let mut dots = [[_mm_setzero_si128(); B_TILE / 4]; A_TILE];
            // Per pair of k: A's 2 rows x 2 values, B's 16 rows x 2 values.
            let (a_pairs, _) = a_block.as_chunks::<{ 2 * A_TILE }>();
            let (b_pairs, _) = b_block.as_chunks::<8>();
            for (a, b) in a_pairs.iter().zip(b_pairs.chunks_exact(B_TILE / 4)) {
                let a = _mm_set_epi64x(
                    0,
                    i64::from(a[0] as u16)
                        | i64::from(a[1] as u16) << 16
                        | i64::from(a[2] as u16) << 32
                        | i64::from(a[3] as u16) << 48,
                );
                let rows = [_mm_shuffle_epi32::<0x00>(a), _mm_shuffle_epi32::<0x55>(a)];
                let b = [0, 1, 2, 3].map(|q| load_i16x8(&b[q]));
                for (dots, row) in dots.iter_mut().zip(rows) {
                    for (dot, &b) in dots.iter_mut().zip(&b) {
                        *dot = _mm_add_epi32(*dot, _mm_madd_epi16(row, b));
                    }
                }
            }
            let (sb, _) = sb.as_chunks::<4>();
            for ((partial, dots), &sa) in partial.iter_mut().zip(&dots).zip(sa) {
                let sa = _mm_set1_ps(sa);
                let (partial, _) = partial.as_chunks_mut::<2>();
                for ((partial, &dot), sb) in partial.iter_mut().zip(dots).zip(sb) {
                    let scale = _mm_mul_ps(sa, _mm_setr_ps(sb[0], sb[1], sb[2], sb[3]));
                    let term = _mm_mul_ps(_mm_cvtepi32_ps(dot), scale);
                    partial[0] = _mm_add_pd(partial[0], _mm_cvtps_pd(term));
                    partial[1] = _mm_add_pd(partial[1], _mm_cvtps_pd(_mm_movehl_ps(term, term)));
                }
            }
        }
        partial.map(|row| {
            let mut out = [0f64; B_TILE];
            for (out, v) in out.as_chunks_mut::<2>().0.iter_mut().zip(row) {
                *out = [_mm_cvtsd_f64(v), _mm_cvtsd_f64(_mm_unpackhi_pd(v, v))];
            }
            out
        })
    }
}

/// `total * 2^-20` as the nearest `f64` (one rounding, and only past 53 bits).
fn fixed_to_f64(total: i128) -> f64 {
    total as f64 / (1u64 << FRAC_BITS) as f64
}

/// `total * 2^-20` rounded to the nearest f32, ties to even (never out of range: |total|
/// stays far below 2^128 units, and the smallest nonzero value 2^-20 is a normal f32).
fn fixed_to_f32(total: i128) -> f32 {
    fixed_to_f32_at(total, FRAC_BITS)
}

/// `total * 2^-frac` rounded to the nearest f32, ties to even (`frac` small enough that
/// 2^-frac is a normal f32).
fn fixed_to_f32_at(total: i128, frac: i32) -> f32 {
    const F32_SIGNIFICAND_BITS: i32 = 24;
    if total == 0 {
        return 0.0;
    }
    let mag = total.unsigned_abs();
    let width = 128 - mag.leading_zeros() as i32;
    let shift = width - F32_SIGNIFICAND_BITS;
    // `kept` has at most 24 significant bits (25 after a carry, a power of two): exact in
    // f64 and, scaled by a power of two, exact in f32.
    let (kept, scale) = if shift <= 0 {
        (mag, -frac)
    } else {
        let kept = mag >> shift;
        let rest = mag & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        (kept + u128::from(rest > half || (rest == half && kept & 1 == 1)), shift - frac)
    };
    let value = (kept as f64 * 2f64.powi(scale)) as f32;
    if total < 0 { -value } else { value }
}

/// `total * 2^-20` rounded to the nearest fp16, ties to even; +-Inf past 65504, +0 for 0.
fn fixed_to_f16(total: i128) -> f16 {
    fixed_to_f16_at(total, FRAC_BITS)
}

/// `total * 2^-frac` rounded to the nearest fp16, ties to even.
fn fixed_to_f16_at(total: i128, frac: i32) -> f16 {
    if total == 0 {
        return f16::ZERO;
    }
    let sign: u16 = if total < 0 { 0x8000 } else { 0 };
    let mag = total.unsigned_abs();
    // The value lies in [2^exp, 2^(exp+1)).
    let exp = (127 - mag.leading_zeros() as i32) - frac;
    if exp > 15 {
        return f16::from_bits(sign | 0x7C00);
    }
    // The fp16 quantum at this exponent: 2^(exp-10) for normals, 2^-24 for subnormals.
    let quantum = (exp - 10).max(-24);
    // Bits of `mag` below the quantum; at most -4 (the fixed point is coarser than 2^-24).
    let shift = quantum + frac;
    let rounded = if shift <= 0 {
        mag << -shift
    } else {
        let kept = mag >> shift;
        let rest = mag & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        kept + u128::from(rest > half || (rest == half && kept & 1 == 1))
    };
    // value = rounded * 2^quantum with rounded <= 2^11. For a normal number of exponent
    // E = quantum + 10, the bits are (E + 15) << 10 | (rounded - 2^10), which is
    // (quantum + 24) << 10 + rounded; for subnormals (quantum = -24) they are `rounded`.
    // A carry to 2^11 (or from 2^10 - 1 up to the smallest normal) lands on the right
    // encoding by the same formula, and so does rounding up to 65536, which gives
    // 0x7C00 = Inf.
    let bits = (((quantum + 24) as u128) << 10) + rounded;
    f16::from_bits(sign | bits as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Distribution, generate};
    use nvfp4::Shape;

    /// The fp16 nearest to `x` (ties to even), found by bracketing `|x|` between
    /// consecutive fp16 values: an oracle independent of [`fixed_to_f16`]'s bit tricks.
    /// Exact for the `x` the tests pass (the bracketing differences are exact).
    fn oracle_f16(x: f64) -> f16 {
        if x.is_nan() {
            return f16::NAN;
        }
        let mag = x.abs();
        // Positive finite fp16 bit patterns are ordered like their values; 0x7C00 stands for
        // 65536, the rounding boundary past the largest finite value, and encodes +Inf.
        let value = |bits: u16| {
            if bits == 0x7C00 { 65536.0 } else { f64::from(f16::from_bits(bits)) }
        };
        let (mut lo, mut hi) = (0u16, 0x7C00u16);
        if mag >= value(hi) {
            lo = hi;
        }
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if value(mid) <= mag { lo = mid } else { hi = mid }
        }
        let bits = if mag == value(lo) || lo == 0x7C00 {
            lo
        } else {
            let (below, above) = (mag - value(lo), value(hi) - mag);
            if below < above || (below == above && lo.is_multiple_of(2)) { lo } else { hi }
        };
        f16::from_bits(bits | if x < 0.0 { 0x8000 } else { 0 })
    }

    /// C by the definition: values and scales decoded to `f32`, products and sums in
    /// `f64`. The sums are exact when K <= 1024 (every product is a multiple of 2^-20 below
    /// 2^23, so partial sums need at most 53 bits), then rounded once by the oracle.
    fn naive(p: &Problem) -> Vec<f16> {
        let s = p.shape;
        let sf_cols = s.sf_cols();
        assert!(s.k <= 1024, "the naive f64 sum is only exact for K <= 1024");
        let value = |packed: &[u8], row: usize, k: usize| {
            let byte = packed[row * s.k as usize / 2 + k / 2];
            let (even, odd) = e2m1::unpack(byte);
            f64::from(e2m1::decode(if k.is_multiple_of(2) { even } else { odd }))
        };
        let scale = |blocked: &[u8], rows: u32, l: u32, r: u32, j: u32| {
            let batch = u64::from(l) * layout::batch_bytes(rows, sf_cols);
            f64::from(e4m3::decode(blocked[(batch + layout::offset(r, j, sf_cols)) as usize]))
        };
        let mut c = Vec::new();
        for l in 0..s.l {
            for m in 0..s.m {
                for n in 0..s.n {
                    let mut sum = 0f64;
                    for k in 0..s.k {
                        let j = k / 16;
                        let a = value(&p.a, (l * s.m + m) as usize, k as usize);
                        let b = value(&p.b, (l * s.n + n) as usize, k as usize);
                        sum += a * scale(&p.sfa, s.m, l, m, j) * b * scale(&p.sfb, s.n, l, n, j);
                    }
                    c.push(oracle_f16(sum));
                }
            }
        }
        c
    }

    /// The reference's fp16 C as values.
    fn ref16(p: &Problem) -> Vec<f16> {
        let c = reference(p);
        assert_eq!(c.dtype, nvfp4::epilogue::OutDtype::F16);
        c.bits.into_iter().map(f16::from_bits).collect()
    }

    fn assert_same(got: &[f16], want: &[f16]) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "element {i}: got {g} ({:#06x}), want {w} ({:#06x})",
                g.to_bits(),
                w.to_bits()
            );
        }
    }

    fn shape(m: u32, n: u32, k: u32, l: u32) -> Shape {
        Shape::new(m, n, k, l).expect("test shape is valid")
    }

    /// A problem with all values zero, scales 1.0 (code 0x38), for hand-built cases.
    fn ones(s: Shape) -> Problem {
        let one = e4m3::encode(1.0);
        let mut p = generate(s, Distribution::GpuMode, 0);
        p.a.fill(0);
        p.b.fill(0);
        for (blocked, rows) in [(&mut p.sfa, s.m), (&mut p.sfb, s.n)] {
            let plain = vec![one; (rows * s.sf_cols() * s.l) as usize];
            layout::to_blocked(&plain, rows, s.sf_cols(), s.l, blocked);
        }
        p
    }

    /// Sets value k of row `row` (batch 0) of a packed operand to the e2m1 `code`.
    fn set_value(packed: &mut [u8], k_total: u32, row: u32, k: u32, code: u8) {
        let byte = &mut packed[(row * k_total / 2 + k / 2) as usize];
        let (even, odd) = e2m1::unpack(*byte);
        *byte = if k.is_multiple_of(2) { e2m1::pack(code, odd) } else { e2m1::pack(even, code) };
    }

    /// Sets scale (row, j) of batch 0 of blocked scales to `bits`.
    fn set_scale(blocked: &mut [u8], sf_cols: u32, row: u32, j: u32, bits: u8) {
        blocked[layout::offset(row, j, sf_cols) as usize] = bits;
    }

    #[test]
    fn matches_the_naive_definition_on_random_shapes() {
        let cases = [
            (shape(1, 1, 64, 1), Distribution::Wide, 1),
            (shape(5, 7, 128, 3), Distribution::Wide, 2),
            (shape(130, 9, 256, 1), Distribution::GpuMode, 3),
            (shape(33, 131, 192, 2), Distribution::Wide, 4),
            (shape(128, 128, 1024, 1), Distribution::Wide, 5),
            (shape(17, 200, 1024, 3), Distribution::GpuMode, 6),
        ];
        for (s, dist, seed) in cases {
            let p = generate(s, dist, seed);
            assert_same(&ref16(&p), &naive(&p));
        }
    }

    #[test]
    fn element_agrees_with_the_fast_path_at_large_k() {
        // K = 8192 with wide scales: sums the naive f64 loop could not hold exactly.
        let p = generate(shape(9, 11, 8192, 2), Distribution::Wide, 9);
        let c = ref16(&p);
        let s = p.shape;
        for l in 0..s.l {
            for m in 0..s.m {
                for n in 0..s.n {
                    let total = element_fixed(&p, l, m, n).expect("no NaN scales drawn");
                    let i = ((l * s.m + m) * s.n + n) as usize;
                    assert_eq!(c[i].to_bits(), fixed_to_f16(total).to_bits(), "({l}, {m}, {n})");
                    assert_eq!(reference_element(&p, l, m, n), fixed_to_f64(total));
                }
            }
        }
    }

    /// The SSE2 kernel against its plain definition, on values and scales over their whole
    /// ranges (negative scales included, as a user's file may hold them).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse2_kernel_matches_the_portable_one() {
        let mut x: u64 = 7;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        let values = [-12i16, -8, -6, -4, -3, -2, -1, 0, 1, 2, 3, 4, 6, 8, 12];
        let blocks = FLUSH_BLOCKS;
        let mut draw_vals =
            |len: usize| -> Vec<i16> { (0..len).map(|_| values[next() as usize % values.len()]).collect() };
        let a_vals = draw_vals(blocks * BLOCK * A_TILE);
        let b_vals = draw_vals(blocks * BLOCK * B_TILE);
        let mut draw_scales = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| match e4m3::decode(next() as u8) {
                    s if s.is_nan() => 448.0,
                    s => s,
                })
                .collect()
        };
        let mut a_scales = draw_scales(blocks * A_TILE);
        let mut b_scales = draw_scales(blocks * B_TILE);
        // Extremes: block 0 has the largest |D| (all 12 * -12 in the second case) under the
        // largest scales, block 1 the smallest scales.
        a_scales[..A_TILE].fill(448.0);
        b_scales[..B_TILE].fill(-448.0);
        a_scales[A_TILE..2 * A_TILE].fill(e4m3::MIN_SUBNORMAL);
        b_scales[B_TILE..2 * B_TILE].fill(e4m3::MIN_SUBNORMAL);
        let mut a_max = a_vals.clone();
        a_max[..BLOCK * A_TILE].fill(12);
        let mut b_max = b_vals.clone();
        b_max[..BLOCK * B_TILE].fill(-12);
        for (a, b) in [(&a_vals, &b_vals), (&a_max, &b_max)] {
            for n in [1, 7, blocks] {
                let portable = partial_sums(
                    &a[..n * BLOCK * A_TILE],
                    &a_scales[..n * A_TILE],
                    &b[..n * BLOCK * B_TILE],
                    &b_scales[..n * B_TILE],
                );
                // SAFETY: SSE2 is part of the x86-64 baseline.
                let sse2 = unsafe {
                    sse2::partial_sums(
                        &a[..n * BLOCK * A_TILE],
                        &a_scales[..n * A_TILE],
                        &b[..n * BLOCK * B_TILE],
                        &b_scales[..n * B_TILE],
                    )
                };
                assert_eq!(portable, sse2, "{n} blocks");
            }
        }
    }

    #[test]
    fn hand_computed_1x1x64() {
        let s = shape(1, 1, 64, 1);
        let mut p = ones(s);
        // Block 0: 4.0 * 4.0 with scales 128 * 1 = 2048 (4.0 is code 6).
        set_value(&mut p.a, 64, 0, 0, 6);
        set_value(&mut p.b, 64, 0, 0, 6);
        set_scale(&mut p.sfa, 4, 0, 0, e4m3::encode(128.0));
        // Block 1: (-1.0 * 1.0) + (0.5 * 6.0) = -1 + 3 = 2 (scales 1): 2050.
        set_value(&mut p.a, 64, 0, 16, 8 | 2);
        set_value(&mut p.b, 64, 0, 16, 2);
        set_value(&mut p.a, 64, 0, 31, 1);
        set_value(&mut p.b, 64, 0, 31, 7);
        assert_eq!(ref16(&p), [f16::from_f32(2050.0)]);
        assert_eq!(reference_element(&p, 0, 0, 0), 2050.0);

        // Block 2: 0.5 * 0.5 with scales 2^-9 * 2^-9: adds 2^-20.
        set_value(&mut p.a, 64, 0, 32, 1);
        set_value(&mut p.b, 64, 0, 32, 1);
        set_scale(&mut p.sfa, 4, 0, 2, 0x01);
        set_scale(&mut p.sfb, 4, 0, 2, 0x01);
        // Block 3: -1.0 * 1.0: total 2049 + 2^-20, just above the tie between 2048 and
        // 2050 (fp16 spacing is 2 there): rounds up to 2050. half's from_f64 gives 2048.
        set_value(&mut p.a, 64, 0, 48, 8 | 2);
        set_value(&mut p.b, 64, 0, 48, 2);
        let exact = 2049.0 + 2f64.powi(-20);
        assert_eq!(reference_element(&p, 0, 0, 0), exact);
        assert_eq!(ref16(&p), [f16::from_f32(2050.0)]);

        // Without the 2^-20: exactly 2049, a tie, goes to the even 2048.
        set_scale(&mut p.sfa, 4, 0, 2, 0x00);
        assert_eq!(ref16(&p), [f16::from_f32(2048.0)]);
    }

    #[test]
    fn rounding_matches_the_oracle() {
        let mut cases: Vec<i128> = vec![1, 15, 16, 17, 24, 40, (1 << 30) - 1];
        // Around the smallest normal (2^-14 = 64 units), the largest finite (65504) and the
        // overflow boundary (65520), and ties at several exponents.
        for center in [64i128, 65504 << 20, 65520 << 20, 2049 << 20, 3 << 18, 1025 << 10] {
            cases.extend((-3..=3).map(|d| center + d));
        }
        // Pseudo-random magnitudes over the whole range (an LCG is enough here).
        let mut x: u64 = 1;
        for _ in 0..20000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            cases.push(i128::from(x >> (x % 64)));
        }
        for total in cases {
            for total in [total, -total] {
                let want = oracle_f16(total as f64 / (1u64 << 20) as f64);
                let got = fixed_to_f16(total);
                assert_eq!(got.to_bits(), want.to_bits(), "{total} units: got {got}, want {want}");
            }
        }
        assert_eq!(fixed_to_f16(65520 << 20), f16::INFINITY);
        assert_eq!(fixed_to_f16((65520 << 20) - 1), f16::MAX);
        assert_eq!(fixed_to_f16(-(1 << 60)), f16::NEG_INFINITY);
        assert_eq!(fixed_to_f16(1).to_bits(), 0x0010, "2^-20 = 16 subnormal quanta");
        assert_eq!(fixed_to_f16(64).to_bits(), 0x0400, "2^-14, the smallest normal");
    }

    #[test]
    fn nan_scales_poison_their_row_and_column() {
        let s = shape(6, 5, 128, 2);
        let mut p = generate(s, Distribution::Wide, 12);
        let sf_cols = s.sf_cols();
        // Batch 0: NaN on A row 2 (0x7F); batch 1: NaN (0xFF) on B row 4, whose values we
        // zero: NaN * 0 is still NaN.
        set_scale(&mut p.sfa, sf_cols, 2, 5, 0x7F);
        let batch1 = layout::batch_bytes(s.n, sf_cols) as usize;
        set_scale(&mut p.sfb[batch1..], sf_cols, 4, 0, 0xFF);
        let row4 = ((s.n + 4) * s.k / 2) as usize;
        p.b[row4..row4 + 8].fill(0);
        let c = ref16(&p);
        for l in 0..2 {
            for m in 0..s.m {
                for n in 0..s.n {
                    let i = ((l * s.m + m) * s.n + n) as usize;
                    let nan = (l == 0 && m == 2) || (l == 1 && n == 4);
                    assert_eq!(c[i].is_nan(), nan, "({l}, {m}, {n})");
                    assert_eq!(reference_element(&p, l, m, n).is_nan(), nan);
                }
            }
        }
        assert_same(&c, &naive(&p));
    }

    #[test]
    fn zero_scales_give_positive_zero() {
        let s = shape(3, 130, 64, 1);
        let mut p = generate(s, Distribution::GpuMode, 13);
        p.sfa.fill(0);
        assert!(ref16(&p).iter().all(|c| c.to_bits() == 0));
    }

    #[test]
    fn large_sums_overflow_to_infinity() {
        // Every value 6.0 and every scale 448: 16384 * 36 * 448^2 >> 65504.
        let s = shape(2, 3, 16384, 1);
        let mut p = ones(s);
        // a: every value 6.0 (0x77); b: even k 6.0, odd k -6.0 (low nibble 7, high 0xF).
        p.a.fill(0x77);
        p.b.fill(0xF7);
        let max = e4m3::encode(448.0);
        for (blocked, rows) in [(&mut p.sfa, s.m), (&mut p.sfb, s.n)] {
            let plain = vec![max; (rows * s.sf_cols()) as usize];
            layout::to_blocked(&plain, rows, s.sf_cols(), 1, blocked);
        }
        // Pairs (6*6) + (6*-6) cancel exactly: 0.
        assert!(ref16(&p).iter().all(|c| c.to_bits() == 0));
        p.b.fill(0x77);
        assert!(ref16(&p).iter().all(|&c| c == f16::INFINITY));
        assert_eq!(reference_element(&p, 0, 1, 2), 16384.0 * 36.0 * 448.0 * 448.0);
    }

    #[test]
    fn epilogue_is_the_f32_order_of_operations() {
        use nvfp4::epilogue::OutDtype;
        let p = generate(shape(37, 45, 192, 2), Distribution::Wide, 9);
        let bias = crate::generate::bias(45, OutDtype::Bf16, 4);
        let cases = [
            Epilogue { alpha: 0.375, alpha_in_memory: false, bias: Some(bias), out: OutDtype::Bf16 },
            Epilogue { alpha: -3.0e-3, alpha_in_memory: true, bias: None, out: OutDtype::F16 },
            Epilogue { out: OutDtype::Bf16, ..Epilogue::IDENTITY },
        ];
        for e in cases {
            let c = reference_with(&p, &e);
            for l in 0..2 {
                for m in 0..37 {
                    for n in 0..45 {
                        let i = ((l * 37 + m) * 45 + n) as usize;
                        // The exact sum, rounded once to f32 (an f64 of it is exact here:
                        // K = 192 needs far fewer than 53 bits), then the fp32 epilogue.
                        let acc = element_fixed(&p, l, m, n).map(|t| t as f64 / (1u64 << FRAC_BITS) as f64);
                        let want = match acc {
                            Some(acc) => e.apply(acc as f32, n as usize),
                            None => canonical_nan(e.out),
                        };
                        assert_eq!(c[i], want, "({l}, {m}, {n}) with {}", e.describe());
                    }
                }
            }
        }
    }

    #[test]
    fn fixed_to_f32_rounds_to_nearest_even() {
        let unit = (1u64 << FRAC_BITS) as f64;
        // 2^24 + 1 units of 2^-20 is a tie between 2^24 and 2^24 + 2 units: even, down.
        assert_eq!(fixed_to_f32((1 << 24) + 1) as f64, (1u64 << 24) as f64 / unit);
        // 2^24 + 3 ties up to 2^24 + 4.
        assert_eq!(fixed_to_f32((1 << 24) + 3) as f64, ((1u64 << 24) + 4) as f64 / unit);
        assert_eq!(fixed_to_f32(-((1 << 25) + 3)) as f64, -(((1u64 << 25) + 4) as f64) / unit);
        assert_eq!(fixed_to_f32(1), 2f32.powi(-20));
        assert_eq!(fixed_to_f32(0), 0.0);
        // Below 2^24 units every total is exact.
        assert_eq!(fixed_to_f32(12_345_677) as f64, 12_345_677.0 / unit);
    }

    /// A 1 x `n` x 32 W4A16 problem in `format`: A's first values `a` (the rest zero), every
    /// weight 1.0 (e2m1 code 2, scale 1.0).
    fn w4a16_ones(format: AFormat, a: &[f64], n: u32) -> Problem {
        let s = shape(1, n, 32, 1);
        let mut p = ones(s);
        for row in 0..n {
            for k in 0..32 {
                set_value(&mut p.b, 32, row, k, 2);
            }
        }
        let bits = |v: f64| match format {
            AFormat::Bf16 => half::bf16::from_f64(v).to_bits(),
            _ => f16::from_f64(v).to_bits(),
        };
        p.a = (0..32).flat_map(|k| bits(a.get(k).copied().unwrap_or(0.0)).to_le_bytes()).collect();
        p.a_format = format;
        p.sfa = Vec::new();
        p
    }

    #[test]
    fn w4a16_bf16_and_fp16_activations_of_the_same_values_give_the_same_c() {
        use crate::generate::generate_w4a16;
        for shape in [shape(3, 40, 96, 2), shape(17, 9, 1024, 1)] {
            let f16 = generate_w4a16(shape, Distribution::GpuMode, 7, AFormat::F16);
            let bf16 = generate_w4a16(shape, Distribution::GpuMode, 7, AFormat::Bf16);
            assert_ne!(f16.a, bf16.a, "{shape}: the bits differ");
            assert_same(&ref16(&bf16), &ref16(&f16));
            // And both are the definition: f64 products and sums (exact at these sizes).
            let want: Vec<f16> = (0..shape.l * shape.m * shape.n)
                .map(|i| {
                    let (row, col) = ((i / shape.n) as usize, (i % shape.n) as usize);
                    let l = row / shape.m as usize;
                    let w = crate::dequant::dequantize(&f16.b, &f16.sfb, shape.n, shape.k, shape.l);
                    let k = shape.k as usize;
                    let x = &f16.a[row * k * 2..][..k * 2];
                    let sum: f64 = (0..k)
                        .map(|kk| {
                            let a = f64::from(f16::from_bits(u16::from_le_bytes([x[2 * kk], x[2 * kk + 1]])));
                            a * f64::from(w[(l * shape.n as usize + col) * k + kk])
                        })
                        .sum();
                    oracle_f16(sum)
                })
                .collect();
            assert_same(&ref16(&f16), &want);
        }
    }

    #[test]
    fn w4a16_bf16_beyond_the_fp16_range_is_exact_or_falls_back_to_f64() {
        // 2^40 + 2^40 + 3·2^-10: exact in units of 2^-19 (the finest value's exponent, less
        // fp16's 10 fraction bits: 60 bits of span), C = 2^41 in f32; times alpha 2^-40 in
        // fp16: 2.0 (an f64 sum would also give it, but the exact path must neither panic
        // nor overflow its units).
        let e = Epilogue { alpha: 2f32.powi(-40), ..Epilogue::IDENTITY };
        let p = w4a16_ones(AFormat::Bf16, &[2f64.powi(40), 2f64.powi(40), 3.0 * 2f64.powi(-10)], 2);
        let c = reference_with(&p, &e);
        assert!(c.iter().all(|&b| f16::from_bits(b) == f16::from_f32(2.0)), "{c:x?}");
        // A span of 200 binades does not fit an i128: the f64 sum, 2^100 (the 2^-100 term
        // is below its last bit), times 2^-100.
        let e = Epilogue { alpha: 2f32.powi(-100), ..Epilogue::IDENTITY };
        let p = w4a16_ones(AFormat::Bf16, &[2f64.powi(100), 2f64.powi(-100)], 1);
        assert_eq!(reference_with(&p, &e), [f16::from_f32(1.0).to_bits()]);
        // Units below 2^-126 (2^-130, a bf16 subnormal): the f64 sum again, an f32
        // subnormal, times alpha 2^120: 2^-10.
        let e = Epilogue { alpha: 2f32.powi(120), ..Epilogue::IDENTITY };
        let p = w4a16_ones(AFormat::Bf16, &[2f64.powi(-130)], 1);
        assert_eq!(reference_with(&p, &e), [f16::from_f32(2f32.powi(-10)).to_bits()]);
    }
}
