//! Hopper warpgroup MMA: `wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16` (PTX ISA §9.7.15
//! "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions").
//!
//! What is modelled:
//! * the 64-bit shared-memory matrix descriptor (§9.7.15.5.1.2 "Matrix Descriptor Format"),
//!   decoded strictly;
//! * the address of each element of a **K-major** f16 operand in shared memory, for the four
//!   layouts (§9.7.15.5.1.2 "Shared Memory Matrix Layout": no swizzle / "interleave", and 32-,
//!   64-, 128-byte swizzle);
//! * which thread holds which element of the accumulator D and of a register operand A
//!   (§9.7.15.5.1.1 "Register Fragments", m64nNk16 with .f16 inputs);
//! * the arithmetic D = A·B (+ D).
//!
//! Not modelled (callers must not ask for them): transposed / MN-major operands (`imm-trans` = 1),
//! a non-zero descriptor base offset, other input types and shapes. The core turns the
//! asynchronous parts (fence, commit_group, wait_group) into ordering; this file is only the
//! data path.
//!
//! Conventions: A is 64×16 (row m, column k), B is N×16 (row = output column j, column k, i.e.
//! "K-major B" stored as Bᵀ), D is 64×N. Addresses are byte addresses in the CTA's shared window.

use super::numeric::{F32_CANONICAL_NAN, f16_to_f32};

/// The `layout_type` field (bits 62-63) of a wgmma descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmemLayout {
    /// 0: no swizzle. The unit is the 8×16-byte core matrix stored as 128 contiguous bytes.
    Interleave,
    /// 1: 128-byte swizzle (atom: 8 rows × 128 B, repeating every 1024 B).
    Swizzle128B,
    /// 2: 64-byte swizzle (atom: 8 rows × 64 B, repeating every 512 B).
    Swizzle64B,
    /// 3: 32-byte swizzle (atom: 8 rows × 32 B, repeating every 256 B).
    Swizzle32B,
}

/// A decoded wgmma shared-memory matrix descriptor. Address fields are in bytes (the encoded
/// value × 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaDesc {
    /// Matrix start address (shared window, 16-byte aligned, < 2^18).
    pub start: u32,
    /// Leading-dimension byte offset. For K-major no-swizzle: distance between the two core
    /// matrices of one 8-row group that are adjacent in K. Unused by swizzled K-major layouts
    /// whose k16 step stays inside one atom row, which is always the case for 2-byte types.
    pub lbo: u32,
    /// Stride-dimension byte offset: distance between consecutive 8-row groups.
    pub sbo: u32,
    /// The 3-bit base offset (bits 49-51); must be 0 for [`WgmmaDesc::k_major_addr`].
    pub base_offset: u32,
    /// Layout / swizzle mode.
    pub layout: SmemLayout,
}

/// Reserved bit ranges of the sm_90 descriptor (inclusive), with a hint for a known mix-up.
const RESERVED_BITS: [(u32, u32, &str); 4] = [
    (14, 15, ""),
    (30, 31, ""),
    (46, 48, " (sm_100 tcgen05 descriptors put the fixed value 0b001 here; Hopper does not)"),
    (52, 61, ""),
];

/// Decodes a wgmma shared-memory matrix descriptor (PTX ISA §9.7.15.5.1.2 "Matrix Descriptor
/// Format"):
///
/// | bits  | field                                   |
/// |-------|-----------------------------------------|
/// | 0-13  | start address >> 4                      |
/// | 16-29 | leading-dimension byte offset >> 4      |
/// | 32-45 | stride-dimension byte offset >> 4       |
/// | 49-51 | base offset                             |
/// | 62-63 | layout: 0 interleave, 1 = 128B, 2 = 64B, 3 = 32B swizzle |
///
/// All other bits are reserved and must be 0; a set reserved bit is an error naming the bit
/// range — in particular bit 46, which the sm_100 descriptor uses, so a Blackwell descriptor fed
/// to the Hopper instruction is caught.
pub fn decode_desc(desc: u64) -> Result<WgmmaDesc, String> {
    for (lo, hi, hint) in RESERVED_BITS {
        let value = (desc >> lo) & ((1u64 << (hi - lo + 1)) - 1);
        if value != 0 {
            return Err(format!(
                "wgmma descriptor {desc:#018x}: reserved bits {lo}-{hi} are {value:#b}, must be \
                 0 on sm_90{hint}"
            ));
        }
    }
    let field14 = |shift: u32| ((desc >> shift) & 0x3FFF) as u32 * 16;
    let layout = match desc >> 62 {
        0 => SmemLayout::Interleave,
        1 => SmemLayout::Swizzle128B,
        2 => SmemLayout::Swizzle64B,
        _ => SmemLayout::Swizzle32B,
    };
    Ok(WgmmaDesc {
        start: field14(0),
        lbo: field14(16),
        sbo: field14(32),
        base_offset: ((desc >> 49) & 0x7) as u32,
        layout,
    })
}

impl WgmmaDesc {
    /// Shared-window byte address of byte `k_byte` (0..32: one k16 step of 2-byte elements) of
    /// row `row` (0..64 for A; 0..N, N ≤ 256, for B) of a K-major operand (PTX ISA §9.7.15.5.1.2
    /// "Shared Memory Matrix Layout", K-major canonical layouts).
    ///
    /// * Interleave (no swizzle): the operand is tiled in core matrices of 8 rows × 16 bytes,
    ///   each stored as 128 contiguous bytes (row-major, 16 B per row). Core matrices adjacent in
    ///   K are LBO apart, 8-row groups SBO apart:
    ///   `start + (row/8)·SBO + (k_byte/16)·LBO + (row%8)·16 + k_byte%16`.
    /// * Swizzled with span W = 128/64/32 bytes: 8-row atoms of W-byte rows, atoms SBO apart:
    ///   `pre = start + (row/8)·SBO + (row%8)·W + k_byte`; then the 16-byte-chunk bits of the
    ///   address are XORed with the bits just above the span's row, taken from the **absolute**
    ///   address: 128B: `bits[4:6] ^= bits[7:9]`; 64B: `bits[4:5] ^= bits[7:8]`;
    ///   32B: `bit 4 ^= bit 7`.
    ///
    /// The XOR on absolute address bits is the reading the project's H100 measurements support
    /// (sm90-wgmma.md §1.2-§1.3): a k16 step j inside a 1024-aligned SW128 tile is addressed by
    /// start + 32·j with no other change, which only works if the hardware swizzles the final
    /// address rather than an offset from `start`. Hence SW tiles must start on the swizzle
    /// repeat (1024/512/256 B) for the pattern to agree with a writer that swizzles relative to
    /// the tile.
    ///
    /// Errors: a non-zero base offset (its effect — shifting the swizzle phase for a tile that
    /// does not start on a repeat boundary — is not modelled; the project never uses it),
    /// `row ≥ 256`, `k_byte ≥ 32`.
    pub fn k_major_addr(&self, row: u32, k_byte: u32) -> Result<u32, String> {
        if self.base_offset != 0 {
            return Err(format!(
                "wgmma descriptor base offset {} not modelled (only 0: tiles start on the swizzle \
                 repeat boundary)",
                self.base_offset
            ));
        }
        if row >= 256 {
            return Err(format!("wgmma operand row {row} out of range (0..256)"));
        }
        if k_byte >= 32 {
            return Err(format!("wgmma k16 byte offset {k_byte} out of range (0..32)"));
        }
        let group = self.start + (row / 8) * self.sbo;
        let span = match self.layout {
            SmemLayout::Interleave => {
                return Ok(group + (k_byte / 16) * self.lbo + (row % 8) * 16 + k_byte % 16);
            }
            SmemLayout::Swizzle128B => 128,
            SmemLayout::Swizzle64B => 64,
            SmemLayout::Swizzle32B => 32,
        };
        let pre = group + (row % 8) * span + k_byte;
        // Chunk mask: log2(span/16) bits starting at bit 4; the row bits start at bit 7.
        let chunk_mask = (span / 16 - 1) << 4;
        Ok(pre ^ ((pre >> 3) & chunk_mask))
    }
}

/// Accumulator fragment of m64nNk16 with f32 D (PTX ISA §9.7.15.5.1.1 "Register Fragments",
/// figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D"): the (row, col)
/// of D held by register `v` (0..N/2) of thread `t` of the warpgroup.
///
/// With w = t/32, lane = t%32, g = lane/4, q = lane%4:
/// `row = 16w + g + 8·((v>>1)&1)`, `col = 8·(v>>2) + 2q + (v&1)`.
/// So registers 0,1 are columns 2q, 2q+1 of row g of the warp's 16-row slice, registers 2,3 the
/// same columns 8 rows lower, and the pattern repeats every 8 columns.
///
/// `t` is taken modulo 128 (warpgroups are 128 aligned threads, so `tid % 128` is the index in
/// the warpgroup). Meaningful for v < N/2; the arithmetic cannot overflow for any `v`.
pub fn acc_coord(t: u32, v: u32) -> (u32, u32) {
    let (w, g, q) = thread_parts(t);
    let row = 16 * w + g + (((v >> 1) & 1) << 3);
    let col = ((v >> 2) << 3) + 2 * q + (v & 1);
    (row, col)
}

/// Register A fragment of m64nNk16 with .f16 A (PTX ISA §9.7.15.5.1.1, figure "WGMMA .m64nNk16
/// register fragment layout for matrix A"): the (row, k) of A held by half `half` (0 = bits
/// 0-15, 1 = bits 16-31) of `.b32` register `reg` (0..4) of thread `t`.
///
/// reg 0 = (16w+g, 2q+half), reg 1 = (16w+g+8, 2q+half), reg 2 = (16w+g, 2q+8+half),
/// reg 3 = (16w+g+8, 2q+8+half): the lower k of a pair sits in the low half. (Each warp holds
/// its 16-row slice exactly like mma.m16n8k16's A fragment.)
///
/// `t` is taken modulo 128; only the low 2 bits of `reg` and the low bit of `half` are used —
/// the caller iterates reg in 0..4 and half in 0..2.
pub fn a_frag_coord(t: u32, reg: u32, half: u32) -> (u32, u32) {
    let (w, g, q) = thread_parts(t);
    let row = 16 * w + g + ((reg & 1) << 3);
    let k = 2 * q + ((reg >> 1) & 1) * 8 + (half & 1);
    (row, k)
}

/// (warp in the warpgroup, lane/4, lane%4).
fn thread_parts(t: u32) -> (u32, u32, u32) {
    let t = t % 128;
    let lane = t % 32;
    (t / 32, lane / 4, lane % 4)
}

/// Whether N is a legal m64nNk16 shape for f16 inputs: 8..=256 in steps of 8 (PTX ISA §9.7.15.2
/// "Matrix Shape").
pub fn valid_n(n: u32) -> bool {
    (8..=256).contains(&n) && n.is_multiple_of(8)
}

/// The 16-bit input type of a `wgmma.mma_async ... .m64nNk16.f32.{f16,bf16}.{f16,bf16}`:
/// both operands have it (PTX ISA §9.7.15.2, "Matrix Data-types").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Inputs {
    #[default]
    F16,
    Bf16,
}

impl Inputs {
    /// The value of one input's bits (exact: both types widen to f32 exactly).
    pub fn value(self, bits: u16) -> f32 {
        match self {
            Inputs::F16 => f16_to_f32(bits),
            Inputs::Bf16 => f32::from_bits((bits as u32) << 16),
        }
    }
}

/// The arithmetic of `wgmma.mma_async ... .m64nNk16.f32.f16.f16` (PTX ISA §9.7.15.5.2
/// "wgmma.mma_async"): `D = A·B + D` when `accumulate` (the `scale-d` predicate is true),
/// `D = A·B` otherwise (input D ignored). `negate_a` / `negate_b` are `imm-scale-a/b = -1`.
///
/// and of its bf16 form (`.f32.bf16.bf16`, `inputs` = [`Inputs::Bf16`]: the same sum; a
/// bf16·bf16 product, 16 significant bits, is just as exact in f64).
///
/// `a`: 64×16 input bits, row-major (m, k). `b`: n×16 input bits, row j = output column j, (j, k).
/// `d`: 64×n f32, row-major. Errors on an illegal `n` or wrong slice lengths (nothing written).
///
/// Numerics — the model's choice, documented because the hardware's is not: each f16·f16
/// product is exact in f64 (22 significant bits); the incoming D (or −0 when not accumulating,
/// the identity that leaves every sum unchanged) and then the 16 products in ascending k are
/// summed in f64, and the sum is rounded once to f32 (`as f32`: round to nearest even, overflow
/// to ±∞). The result is the exactly rounded f32 of the true sum whenever the f64 additions are
/// exact — in particular whenever every partial sum is exact in f32. The tensor core's internal
/// alignment and rounding of the 17-term sum are not public and may differ in the last f32 bit
/// when the terms span many binades. f16 subnormals are exact inputs (the H100 probe saw 2^-24
/// inputs give exactly 2^-24; sm90-wgmma.md §3.3).
///
/// Specials follow IEEE arithmetic in f64: NaN · x = NaN, ∞ · 0 = NaN, ∞ − ∞ = NaN; a NaN
/// result is stored as the canonical f32 NaN 0x7FFF_FFFF. The sign of an exact zero result
/// follows IEEE addition (−0 only if every term is −0).
#[allow(clippy::too_many_arguments)] // the instruction's operands
pub fn mma_f32(
    inputs: Inputs,
    n: usize,
    a: &[u16],
    b: &[u16],
    d: &mut [f32],
    accumulate: bool,
    negate_a: bool,
    negate_b: bool,
) -> Result<(), String> {
    if !u32::try_from(n).is_ok_and(valid_n) {
        return Err(format!("wgmma m64nNk16: N = {n} is not in 8..=256 in steps of 8"));
    }
    let sign = if negate_a != negate_b { -1.0 } else { 1.0 };
    sum_products(inputs, 64, n, (a, b), d, accumulate, sign)
}

/// The arithmetic of the warp-level `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
/// and its `.bf16.bf16` form (D = A·B + D, A 16×16 and B 8×16 input bits as in
/// [`mma_f32`], D 16×8): the PTX ISA does not describe its internal sum either, so the model
/// is [`mma_f32`]'s.
pub fn mma_sync_m16n8k16_f32(inputs: Inputs, a: &[u16], b: &[u16], d: &mut [f32]) -> Result<(), String> {
    sum_products(inputs, 16, 8, (a, b), d, true, 1.0)
}

/// D (`rows` × `n`) = `sign`·A·B (+ D when `accumulate`), each element's products summed
/// in f64 after D and rounded once.
fn sum_products(
    inputs: Inputs,
    rows: usize,
    n: usize,
    (a, b): (&[u16], &[u16]),
    d: &mut [f32],
    accumulate: bool,
    sign: f64,
) -> Result<(), String> {
    const K: usize = 16;
    for (name, len, want) in [("A", a.len(), rows * K), ("B", b.len(), n * K), ("D", d.len(), rows * n)] {
        if len != want {
            return Err(format!("mma m{rows}n{n}k16: operand {name} has {len} elements, expected {want}"));
        }
    }
    let a: Vec<f64> = a.iter().map(|&h| f64::from(inputs.value(h))).collect();
    let b: Vec<f64> = b.iter().map(|&h| f64::from(inputs.value(h))).collect();
    for (m, d_row) in d.chunks_exact_mut(n).enumerate() {
        let a_row = &a[m * K..(m + 1) * K];
        for (dst, b_row) in d_row.iter_mut().zip(b.chunks_exact(K)) {
            let mut sum = if accumulate { f64::from(*dst) } else { -0.0 };
            for (x, y) in a_row.iter().zip(b_row) {
                sum += sign * (x * y);
            }
            *dst = if sum.is_nan() { f32::from_bits(F32_CANONICAL_NAN) } else { sum as f32 };
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds an sm_90 descriptor the way the PTX ISA table reads (test-only; the emulator only
    /// decodes).
    fn desc(start: u32, lbo: u32, sbo: u32, layout: u64) -> u64 {
        u64::from(start >> 4) | u64::from(lbo >> 4) << 16 | u64::from(sbo >> 4) << 32 | layout << 62
    }

    fn sw128(start: u32) -> WgmmaDesc {
        decode_desc(desc(start, 16, 1024, 1)).unwrap()
    }

    #[test]
    fn decodes_the_measured_descriptors() {
        // sm90-wgmma.md §1.4: values that produced correct results on an H100.
        let d = decode_desc(0x4000_0040_0001_0040).unwrap();
        assert_eq!(d, WgmmaDesc { start: 0x400, lbo: 16, sbo: 1024, base_offset: 0, layout: SmemLayout::Swizzle128B });
        assert_eq!(decode_desc(0x4000_0040_0001_0046).unwrap().start, 0x460);
        assert_eq!(decode_desc(0x4000_0040_0001_0240).unwrap().start, 0x2400);
        let d = decode_desc(0x4000_0040_0001_1804).unwrap();
        assert_eq!((d.start, d.lbo, d.sbo, d.layout), (0x18040, 16, 1024, SmemLayout::Swizzle128B));
        let d = decode_desc(0x4000_0040_0000_1800).unwrap();
        assert_eq!((d.start, d.lbo, d.sbo), (0x18000, 0, 1024));
        assert_eq!(desc(0x400, 16, 1024, 1), 0x4000_0040_0001_0040);
    }

    #[test]
    fn decodes_layouts_and_base_offset() {
        let layouts = [SmemLayout::Interleave, SmemLayout::Swizzle128B, SmemLayout::Swizzle64B, SmemLayout::Swizzle32B];
        for (code, layout) in (0u64..).zip(layouts) {
            assert_eq!(decode_desc(code << 62).unwrap().layout, layout);
        }
        let d = decode_desc(5 << 49).unwrap();
        assert_eq!(d.base_offset, 5);
        assert!(d.k_major_addr(0, 0).unwrap_err().contains("base offset 5"));
        let max = decode_desc(desc(0x3FFF0, 0x3FFF0, 0x3FFF0, 0)).unwrap();
        assert_eq!((max.start, max.lbo, max.sbo), (0x3FFF0, 0x3FFF0, 0x3FFF0));
    }

    #[test]
    fn rejects_every_reserved_bit() {
        let good = 0x4000_0040_0001_0040u64;
        for bit in (14..=15).chain(30..=31).chain(46..=48).chain(52..=61) {
            let err = decode_desc(good | 1 << bit).unwrap_err();
            assert!(err.contains("reserved bits"), "bit {bit}: {err}");
        }
        let err = decode_desc(good | 1 << 46).unwrap_err();
        assert!(err.contains("46-48") && err.contains("sm_100"), "{err}");
    }

    #[test]
    fn swizzle128_matches_the_tile_formula() {
        // sm90-wgmma.md §1.2-1.3: element (r, k) of a 1024-aligned tile with 128-B rows is at
        // 128r + 16((k/8) ^ (r%8)) + 2(k%8); k16 step j uses the descriptor start + 32j.
        for tile in [0x400, 0x18000] {
            for r in 0..64 {
                for k in 0..64 {
                    let j = k / 16;
                    let addr = sw128(tile + 32 * j).k_major_addr(r, 2 * (k % 16)).unwrap();
                    let want = tile + 128 * r + 16 * ((k / 8) ^ (r % 8)) + 2 * (k % 8);
                    assert_eq!(addr, want, "tile {tile:#x} r {r} k {k}");
                }
            }
        }
        // A 256-row B operand: 8-row groups 1024 B apart.
        assert_eq!(sw128(0x2400).k_major_addr(255, 0).unwrap(), 0x2400 + 128 * 255 + 16 * 7);
    }

    #[test]
    fn swizzle64_and_32_match_their_formulas() {
        // 64B: rows of 64 B, 8-row atoms of 512 B; the XOR source bits [7:8] are (r/2)%4.
        let d = decode_desc(desc(0x800, 0, 512, 2)).unwrap();
        for r in 0..64 {
            for k in 0..16 {
                let want = 0x800 + 64 * r + 16 * ((k / 8) ^ ((r / 2) % 4)) + 2 * (k % 8);
                assert_eq!(d.k_major_addr(r, 2 * k).unwrap(), want, "r {r} k {k}");
            }
        }
        // 32B: rows of 32 B, 8-row atoms of 256 B; bit 7 is (r/4)%2.
        let d = decode_desc(desc(0x900, 0, 256, 3)).unwrap();
        for r in 0..64 {
            for k in 0..16 {
                let want = 0x900 + 32 * r + 16 * ((k / 8) ^ ((r / 4) % 2)) + 2 * (k % 8);
                assert_eq!(d.k_major_addr(r, 2 * k).unwrap(), want, "r {r} k {k}");
            }
        }
    }

    #[test]
    fn interleave_addresses() {
        // Core matrices of 128 B; the two K-halves 128 B apart (LBO), 8-row groups 256 B apart.
        let d = decode_desc(desc(0x100, 128, 256, 0)).unwrap();
        assert_eq!(d.layout, SmemLayout::Interleave);
        assert_eq!(d.k_major_addr(0, 0).unwrap(), 0x100);
        assert_eq!(d.k_major_addr(1, 0).unwrap(), 0x110);
        assert_eq!(d.k_major_addr(0, 15).unwrap(), 0x10F);
        assert_eq!(d.k_major_addr(0, 16).unwrap(), 0x180);
        assert_eq!(d.k_major_addr(7, 31).unwrap(), 0x100 + 128 + 7 * 16 + 15);
        assert_eq!(d.k_major_addr(9, 18).unwrap(), 0x292);
        assert_eq!(d.k_major_addr(63, 0).unwrap(), 0x100 + 7 * 256 + 7 * 16);
        // Every byte of a 64×32-byte operand gets its own address.
        let mut seen = std::collections::HashSet::new();
        for r in 0..64 {
            for kb in 0..32 {
                assert!(seen.insert(d.k_major_addr(r, kb).unwrap()));
            }
        }
    }

    #[test]
    fn address_argument_errors() {
        let d = sw128(0x400);
        assert!(d.k_major_addr(256, 0).unwrap_err().contains("row 256"));
        assert!(d.k_major_addr(0, 32).unwrap_err().contains("32"));
        assert!(d.k_major_addr(255, 31).is_ok());
    }

    #[test]
    fn accumulator_fragment_covers_d_once() {
        for n in [8u32, 16, 136, 256] {
            let mut hits = vec![0u8; 64 * n as usize];
            for t in 0..128 {
                for v in 0..n / 2 {
                    let (row, col) = acc_coord(t, v);
                    assert!(row < 64 && col < n, "t {t} v {v} → ({row}, {col})");
                    hits[(row * n + col) as usize] += 1;
                }
            }
            assert!(hits.iter().all(|&h| h == 1), "n = {n}");
        }
        // Hand values: thread 0; thread 37 = warp 1, lane 5 (g 1, q 1).
        assert_eq!(acc_coord(0, 0), (0, 0));
        assert_eq!(acc_coord(0, 1), (0, 1));
        assert_eq!(acc_coord(0, 2), (8, 0));
        assert_eq!(acc_coord(0, 4), (0, 8));
        assert_eq!(acc_coord(37, 0), (17, 2));
        assert_eq!(acc_coord(37, 7), (25, 11));
        assert_eq!(acc_coord(37 + 128, 7), (25, 11));
        assert_eq!(acc_coord(127, 127), (63, 255));
    }

    #[test]
    fn a_fragment_covers_a_once() {
        let mut hits = [0u8; 64 * 16];
        for t in 0..128 {
            for reg in 0..4 {
                for half in 0..2 {
                    let (row, k) = a_frag_coord(t, reg, half);
                    assert!(row < 64 && k < 16);
                    hits[(row * 16 + k) as usize] += 1;
                }
            }
        }
        assert!(hits.iter().all(|&h| h == 1));
        assert_eq!(a_frag_coord(0, 0, 0), (0, 0));
        assert_eq!(a_frag_coord(0, 0, 1), (0, 1));
        assert_eq!(a_frag_coord(37, 1, 0), (25, 2));
        assert_eq!(a_frag_coord(37, 2, 1), (17, 11));
        assert_eq!(a_frag_coord(127, 3, 1), (63, 15));
    }

    #[test]
    fn valid_shapes() {
        assert!(valid_n(8) && valid_n(128) && valid_n(256) && valid_n(136));
        assert!(!valid_n(0) && !valid_n(4) && !valid_n(12) && !valid_n(264));
    }

    fn f16(x: f32) -> u16 {
        super::super::numeric::cvt_f16_f32(x)
    }

    #[test]
    fn identity_a_selects_b() {
        // a[m][k] = 1 iff k = m % 16, so d[m][j] = b[j][m % 16].
        let n = 24;
        let a: Vec<u16> = (0..64 * 16).map(|i| f16(f32::from(u8::from(i % 16 == (i / 16) % 16)))).collect();
        let bv = |j: usize, k: usize| (j * 16 + k) as f32 - 100.0;
        let b: Vec<u16> = (0..n * 16).map(|i| f16(bv(i / 16, i % 16))).collect();
        let mut d = vec![f32::NAN; 64 * n];
        mma_f32(Inputs::F16, n, &a, &b, &mut d, false, false, false).unwrap();
        for m in 0..64 {
            for j in 0..n {
                assert_eq!(d[m * n + j], bv(j, m % 16), "m {m} j {j}");
            }
        }
        // Accumulate adds onto D; negating both operands changes nothing.
        mma_f32(Inputs::F16, n, &a, &b, &mut d, true, true, true).unwrap();
        assert_eq!(d[3 * n + 5], 2.0 * bv(5, 3));
        // Negating one operand subtracts.
        mma_f32(Inputs::F16, n, &a, &b, &mut d, true, true, false).unwrap();
        assert_eq!(d[3 * n + 5], bv(5, 3));
        mma_f32(Inputs::F16, n, &a, &b, &mut d, false, false, true).unwrap();
        assert_eq!(d[3 * n + 5], -bv(5, 3));
    }

    #[test]
    fn random_small_integers_match_a_plain_loop() {
        // Small integers: every partial sum is exact in f32, so the result is exact.
        let mut state = 0x1234_5678u32;
        let mut next = move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((state >> 24) % 17) as i32 - 8
        };
        let n = 40;
        let ai: Vec<i32> = (0..64 * 16).map(|_| next()).collect();
        let bi: Vec<i32> = (0..n * 16).map(|_| next()).collect();
        let di: Vec<i32> = (0..64 * n).map(|_| next() * 100).collect();
        let a: Vec<u16> = ai.iter().map(|&x| f16(x as f32)).collect();
        let b: Vec<u16> = bi.iter().map(|&x| f16(x as f32)).collect();
        let mut d: Vec<f32> = di.iter().map(|&x| x as f32).collect();
        mma_f32(Inputs::F16, n, &a, &b, &mut d, true, false, true).unwrap();
        for m in 0..64 {
            for j in 0..n {
                let dot: i32 = (0..16).map(|k| ai[m * 16 + k] * bi[j * 16 + k]).sum();
                assert_eq!(d[m * n + j], (di[m * n + j] - dot) as f32, "m {m} j {j}");
            }
        }
    }

    #[test]
    fn bf16_inputs_are_read_as_bf16() {
        // bf16 holds 2^100 and 3 * 2^-100, far outside fp16: one product 3 * 2^0 = 3, and
        // 1.5 * 1.5 at k = 1; the same bits read as fp16 would be other values entirely.
        let bf16 = |x: f32| (x.to_bits() >> 16) as u16;
        let (a, b) = one_term(&[(0, bf16(2f32.powi(100)), bf16(3.0 * 2f32.powi(-100))), (1, bf16(1.5), bf16(1.5))]);
        let mut d = vec![0f32; 64 * 8];
        mma_f32(Inputs::Bf16, 8, &a, &b, &mut d, false, false, false).unwrap();
        assert_eq!(d[0], 3.0 + 2.25);
        assert_eq!(Inputs::Bf16.value(bf16(-0.375)), -0.375);
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, false, false, false).unwrap();
        assert_ne!(d[0], 3.0 + 2.25);
    }

    /// A, B with one nonzero entry (row 0 / column 0, at `k`) each, for single-element checks.
    fn one_term(terms: &[(usize, u16, u16)]) -> (Vec<u16>, Vec<u16>) {
        let (mut a, mut b) = (vec![0u16; 64 * 16], vec![0u16; 8 * 16]);
        for &(k, x, y) in terms {
            a[k] = x;
            b[k] = y;
        }
        (a, b)
    }

    #[test]
    fn sum_is_rounded_once() {
        // D = 1, products 2^-24 (half an f32 ulp at 1: a tie) and 2^-40: the exact sum is just
        // above the tie, so the model gives 1 + 2^-23. Rounding after each addition would give 1.
        let (a, b) = one_term(&[(0, 0x0001, 0x3C00), (1, 0x0010, 0x0010)]);
        let mut d = vec![1.0f32; 64 * 8];
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, true, false, false).unwrap();
        assert_eq!(d[0], 1.0 + 2f32.powi(-23));
        assert_eq!(d[1], 1.0); // other entries: 1 + 0
        // Subnormal inputs are exact: 2^-24 · 1 = 2^-24.
        let (a, b) = one_term(&[(5, 0x0001, 0x3C00)]);
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, false, false, false).unwrap();
        assert_eq!(d[0], 2f32.powi(-24));
    }

    #[test]
    fn specials_and_signed_zero() {
        // ∞ · 0 → canonical NaN; ∞ · 1 → ∞; NaN input → canonical NaN.
        let (a, b) = one_term(&[(0, 0x7C00, 0x0000)]);
        let mut d = vec![0.0f32; 64 * 8];
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, false, false, false).unwrap();
        assert_eq!(d[0].to_bits(), 0x7FFF_FFFF);
        let (a, b) = one_term(&[(0, 0x7C00, 0x3C00)]);
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, false, false, true).unwrap();
        assert_eq!(d[0], f32::NEG_INFINITY);
        let (a, b) = one_term(&[(0, 0x7C00, 0x3C00), (1, 0xFC00, 0x3C00)]);
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, false, false, false).unwrap();
        assert_eq!(d[0].to_bits(), 0x7FFF_FFFF); // ∞ - ∞
        d[0] = f32::from_bits(0xFFC0_0001);
        mma_f32(Inputs::F16, 8, &one_term(&[]).0, &one_term(&[]).1, &mut d, true, false, false).unwrap();
        assert_eq!(d[0].to_bits(), 0x7FFF_FFFF); // NaN D propagates, canonicalized
        // Zero signs: all products +0 and no accumulate → +0; all −0 → −0.
        let (a, b) = one_term(&[]);
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, false, false, false).unwrap();
        assert_eq!(d[0].to_bits(), 0);
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, false, true, false).unwrap();
        assert_eq!(d[0].to_bits(), 0x8000_0000);
        // Accumulating +0 products onto D = −0 gives +0 (IEEE: −0 + +0 = +0).
        d[0] = -0.0;
        mma_f32(Inputs::F16, 8, &a, &b, &mut d, true, false, false).unwrap();
        assert_eq!(d[0].to_bits(), 0);
    }

    #[test]
    fn shape_and_length_errors() {
        let (a, b) = one_term(&[]);
        let mut d = vec![0.0f32; 64 * 8];
        assert!(mma_f32(Inputs::F16, 12, &a, &b, &mut d, false, false, false).unwrap_err().contains("N = 12"));
        assert!(mma_f32(Inputs::F16, 8, &a[1..], &b, &mut d, false, false, false).unwrap_err().contains("A has"));
        assert!(mma_f32(Inputs::F16, 8, &a, &b[1..], &mut d, false, false, false).unwrap_err().contains("B has"));
        assert!(mma_f32(Inputs::F16, 8, &a, &b, &mut d[1..], false, false, false).unwrap_err().contains("D has"));
    }
}
