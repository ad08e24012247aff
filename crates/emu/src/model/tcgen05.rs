//! Blackwell fifth-generation tensor core, block-scaled FP4 path: `tcgen05.mma.cta_group::1
//! .kind::mxf4nvf4.block_scale.scale_vec::4X` and the `.32x128b.warpx4` scale copy (PTX ISA
//! §9.7.16 "TensorCore 5th Generation Family Instructions").
//!
//! What is modelled, decoded strictly from the ISA tables (not from the project's `nvfp4`
//! builders, so a shared misunderstanding cannot pass silently):
//! * the 32-bit instruction descriptor of `.kind::mxf4` / `.kind::mxf4nvf4` (§9.7.16.4.2,
//!   Table 44 "Instruction descriptor format for .kind::mxf4 and .kind::mxf4nvf4");
//! * the 64-bit sm_100 shared-memory matrix descriptor (§9.7.16.4.1, Table 40 "Shared memory
//!   descriptor layout");
//! * the address of each 16-byte chunk of a K-major 128B-swizzled fp4 operand (one MMA reads
//!   32 bytes = 64 packed e2m1 values per row), and of each 16-byte row of the no-swizzle
//!   source of `tcgen05.cp.32x128b`;
//! * e2m1 operands and ue4m3 / ue8m0 scale factors;
//! * the arithmetic D = A·SFA · (B·SFB)ᵀ (+ D).
//!
//! Not modelled (reported, never guessed): sparsity, MN-major operands, M ≠ 128, K = 96, scale
//! vector sizes other than 4X, a non-zero descriptor base offset, swizzles other than 128B for
//! the MMA operands and other than none for the scale copy. A ue4m3 scale byte with bit 7 set is
//! an invalid encoding (PTX ISA §5.2.3: the 7-bit format's byte has its MSB padded with zero).

use super::numeric::F32_CANONICAL_NAN;
use super::wgmma::{SmemLayout, WgmmaDesc};

/// Tensor-memory lanes per CTA.
pub const TMEM_LANES: u32 = 128;
/// Tensor-memory columns (32-bit cells per lane) per CTA.
pub const TMEM_COLUMNS: u32 = 512;
/// Rows of A and D per instruction (`cta_group::1`, dense block-scaled kinds: M = 128 only).
pub const MMA_M: usize = 128;
/// K per instruction for 4-bit types (dense): 64 values = 32 bytes of each row.
pub const MMA_K: usize = 64;
/// Bytes of one operand row per instruction.
pub const ROW_BYTES: u32 = 32;
/// K values covered by one scale factor with `.scale_vec::4X`.
pub const SCALE_BLOCK: usize = 16;

/// The scale-factor type (Table 44 bit 23), shared by SFA and SFB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleFormat {
    /// 0: unsigned e4m3 (bias 7, subnormals, `0x7F` NaN).
    Ue4m3,
    /// 1: unsigned e8m0, `2^(x - 127)`, `0xFF` NaN.
    Ue8m0,
}

/// A decoded `.kind::mxf4nvf4` instruction descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstrDesc {
    pub m: u32,
    pub n: u32,
    pub scale: ScaleFormat,
    pub negate_a: bool,
    pub negate_b: bool,
}

/// Decodes the instruction descriptor of `tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale
/// .scale_vec::4X` (PTX ISA Table 44):
///
/// | bits  | field                                   | accepted here                        |
/// |-------|-----------------------------------------|--------------------------------------|
/// | 0-1   | sparsity selector                       | 0                                    |
/// | 2     | sparsity                                | 0 (dense)                            |
/// | 3     | reserved                                | 0                                    |
/// | 4-5   | matrix B scale-factor id                | 0 (the only value for 4X)            |
/// | 6     | reserved                                | 0                                    |
/// | 7-9   | A type                                  | 1 = E2M1                             |
/// | 10-11 | B type (bit 12 reserved)                | 1 = E2M1                             |
/// | 13/14 | negate A / B                            | 0 or 1                               |
/// | 15/16 | transpose A / B                         | 0 (K-major: the only layout for 4-bit)|
/// | 17-22 | N >> 3                                  | N in 8..=256                         |
/// | 23    | scale type                              | 0 = UE4M3, 1 = UE8M0                 |
/// | 24-26 | reserved                                | 0                                    |
/// | 27-28 | M >> 7                                  | 1 (M = 128, `cta_group::1`)          |
/// | 29-30 | matrix A scale-factor id                | 0                                    |
/// | 31    | K size                                  | 0 (1 = K 96, sm_103a only)           |
///
/// Every other value is an error naming the field.
pub fn decode_idesc(idesc: u32) -> Result<InstrDesc, String> {
    let field = |lo: u32, hi: u32| (idesc >> lo) & ((1u32 << (hi - lo + 1)) - 1);
    let bad = |lo: u32, hi: u32, what: &str, why: &str| {
        Err(format!("instruction descriptor {idesc:#010x}: {what} (bits {lo}-{hi}) is {}, {why}", field(lo, hi)))
    };
    if field(0, 1) != 0 {
        return bad(0, 1, "the sparsity selector", "must be 0 for a dense MMA");
    }
    if field(2, 2) != 0 {
        return bad(2, 2, "the sparsity flag", "must be 0: sparse MMAs need the .sp form, not modelled");
    }
    if field(3, 3) != 0 {
        return bad(3, 3, "a reserved field", "must be 0");
    }
    if field(4, 5) != 0 {
        return bad(
            4,
            5,
            "the matrix B scale-factor id",
            "must be 0 with .scale_vec::4X (in the kind::f16/tf32/f8f6f4 descriptor these bits are the D type, \
             F32 = 1: a descriptor of another kind?)",
        );
    }
    if field(6, 6) != 0 {
        return bad(6, 6, "a reserved field", "must be 0");
    }
    if field(7, 9) != 1 {
        return bad(
            7,
            9,
            "the A type",
            "must be 1 = E2M1 for .kind::mxf4nvf4 (E2M1 is 5 only in the kind::f8f6f4 table)",
        );
    }
    if field(10, 11) != 1 {
        return bad(
            10,
            11,
            "the B type",
            "must be 1 = E2M1 for .kind::mxf4nvf4 (E2M1 is 5 only in the kind::f8f6f4 table)",
        );
    }
    if field(12, 12) != 0 {
        return bad(12, 12, "a reserved field (above the B type)", "must be 0");
    }
    if field(15, 15) != 0 {
        return bad(15, 15, "the transpose-A (major-ness) flag", "must be 0: 4-bit operands are K-major only");
    }
    if field(16, 16) != 0 {
        return bad(16, 16, "the transpose-B (major-ness) flag", "must be 0: 4-bit operands are K-major only");
    }
    let n = field(17, 22) << 3;
    if !(8..=256).contains(&n) {
        return bad(17, 22, "N >> 3", "N must be a multiple of 8 in 8..=256 for M = 128");
    }
    if field(24, 26) != 0 {
        return bad(
            24,
            26,
            "a reserved field (below M >> 7)",
            "must be 0 (is M shifted into the wrong bits? M >> 7 belongs at bit 27)",
        );
    }
    if field(27, 28) != 1 {
        return bad(
            27,
            28,
            "M >> 7",
            "must be 1: M = 128 is the only dense block-scaled shape of cta_group::1 (M = 256 needs cta_group::2)",
        );
    }
    if field(29, 30) != 0 {
        return bad(29, 30, "the matrix A scale-factor id", "must be 0 with .scale_vec::4X");
    }
    if field(31, 31) != 0 {
        return bad(31, 31, "the K size", "must be 0 (K = 64); 1 (K = 96) exists on sm_103a only");
    }
    Ok(InstrDesc {
        m: 128,
        n,
        scale: if field(23, 23) == 0 { ScaleFormat::Ue4m3 } else { ScaleFormat::Ue8m0 },
        negate_a: field(13, 13) != 0,
        negate_b: field(14, 14) != 0,
    })
}

/// The swizzle field (bits 61-63) of an sm_100 shared-memory descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// 0: no swizzle (8-row × 16-byte core matrices).
    None,
    /// 1: 128-byte swizzle with 32-byte atomicity.
    Sw128Base32B,
    /// 2: 128-byte swizzle.
    Sw128,
    /// 4: 64-byte swizzle.
    Sw64,
    /// 6: 32-byte swizzle.
    Sw32,
}

/// A decoded sm_100 shared-memory matrix descriptor; addresses and offsets in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemDesc {
    pub start: u32,
    pub lbo: u32,
    pub sbo: u32,
    pub base_offset: u32,
    pub swizzle: Swizzle,
}

/// Why a descriptor cannot be used: an encoding the ISA forbids, or one it allows that the
/// emulator does not model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DescError {
    Invalid(String),
    Unsupported(String),
}

impl std::fmt::Display for DescError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DescError::Invalid(m) | DescError::Unsupported(m) => f.write_str(m),
        }
    }
}

/// Decodes an sm_100 shared-memory descriptor (PTX ISA Table 40):
///
/// | bits  | field                                                         |
/// |-------|---------------------------------------------------------------|
/// | 0-13  | start address >> 4                                            |
/// | 14-15 | reserved (0)                                                  |
/// | 16-29 | leading-dimension byte offset >> 4                            |
/// | 30-31 | reserved (0)                                                  |
/// | 32-45 | stride-dimension byte offset >> 4                             |
/// | 46-48 | fixed 0b001 (the sm_100 descriptor version)                   |
/// | 49-51 | matrix base offset                                            |
/// | 52    | LBO mode: 0 relative (1 absolute: not accepted here)          |
/// | 53-60 | fixed 0                                                       |
/// | 61-63 | swizzle: 0 none, 1 128B-base32B, 2 128B, 4 64B, 6 32B; 3/5/7 invalid |
///
/// A set reserved bit is an error naming its field; bits 14-15 in particular are where a
/// start address advanced past the 14-bit field (≥ 256 KiB) carries to.
pub fn decode_smem_desc(desc: u64) -> Result<SmemDesc, String> {
    let field = |lo: u32, hi: u32| (desc >> lo) & ((1u64 << (hi - lo + 1)) - 1);
    let bad = |lo: u32, hi: u32, what: &str, why: &str| {
        Err(format!("shared-memory descriptor {desc:#018x}: {what} (bits {lo}-{hi}) is {:#b}, {why}", field(lo, hi)))
    };
    if field(14, 15) != 0 {
        return bad(
            14,
            15,
            "a reserved field above the start address",
            "must be 0 (did advancing the start address overflow its 14-bit field, i.e. pass 256 KiB?)",
        );
    }
    if field(30, 31) != 0 {
        return bad(30, 31, "a reserved field above the leading byte offset", "must be 0");
    }
    if field(46, 48) != 1 {
        return bad(46, 48, "the descriptor version", "must be 0b001 on sm_100 (a Hopper wgmma descriptor has 0 here)");
    }
    if field(52, 52) != 0 {
        return bad(52, 52, "the LBO mode", "must be 0 (relative): the absolute mode is not supported here");
    }
    if field(53, 60) != 0 {
        return bad(53, 60, "a fixed-zero field", "must be 0");
    }
    let swizzle = match field(61, 63) {
        0 => Swizzle::None,
        1 => Swizzle::Sw128Base32B,
        2 => Swizzle::Sw128,
        4 => Swizzle::Sw64,
        6 => Swizzle::Sw32,
        _ => return bad(61, 63, "the swizzle mode", "is invalid (valid: 0 none, 1, 2, 4, 6)"),
    };
    let field14 = |lo: u32| (field(lo, lo + 13) as u32) << 4;
    Ok(SmemDesc { start: field14(0), lbo: field14(16), sbo: field14(32), base_offset: field(49, 51) as u32, swizzle })
}

impl SmemDesc {
    fn require_base_offset_zero(&self) -> Result<(), DescError> {
        if self.base_offset != 0 {
            return Err(DescError::Unsupported(format!(
                "descriptor base offset {} is not modelled (only 0: keep swizzled tiles aligned to their repeat, 1024 B \
                 for 128B swizzle)",
                self.base_offset
            )));
        }
        Ok(())
    }

    /// Shared-window address of the 16-byte chunk `chunk` (0 or 1: bytes 16·chunk..+16 of the
    /// instruction's 32 K bytes) of row `row` of a K-major MMA operand (PTX ISA §9.7.16.3
    /// "Matrix descriptors: shared memory layouts", K-major canonical layouts).
    ///
    /// Only 128-byte swizzle is modelled: 8-row atoms of 128-byte rows, atoms SBO apart, the
    /// 16-byte chunk index XORed with address bits 7-9 of the **absolute** address
    /// (`Swizzle<3,4,3>`); LBO is ignored ("assumed 1" for swizzled K-major layouts). This is
    /// the sm_90 wgmma layout the project validated bit-exact on an H100, shared with it
    /// ([`WgmmaDesc::k_major_addr`]): advancing `start` by 32 bytes per K=64 step works
    /// because the swizzle applies to the final address.
    pub fn mma_operand_chunk(&self, row: u32, chunk: u32) -> Result<u32, DescError> {
        self.require_base_offset_zero()?;
        match self.swizzle {
            Swizzle::Sw128 => {}
            Swizzle::Sw128Base32B => {
                return Err(DescError::Invalid(
                    "swizzle mode 1 (128B with 32-byte atomicity) is not valid for K-major operands".into(),
                ));
            }
            other => {
                return Err(DescError::Unsupported(format!(
                    "swizzle {other:?} for an mxf4nvf4 operand is not modelled (only 128-byte swizzle)"
                )));
            }
        }
        let wg = WgmmaDesc {
            start: self.start,
            lbo: self.lbo,
            sbo: self.sbo,
            base_offset: 0,
            layout: SmemLayout::Swizzle128B,
        };
        wg.k_major_addr(row, 16 * chunk).map_err(DescError::Invalid)
    }

    /// Shared-window address of source row `row` (0..32) of `tcgen05.cp.32x128b` (PTX ISA
    /// §9.7.16.9.2 "tcgen05.cp"): a K-major no-swizzle layout of 16-byte rows, core matrices
    /// of 8 rows (128 contiguous bytes) SBO apart: `start + (row/8)·SBO + (row%8)·16`. LBO
    /// is unused (a row is one 16-byte chunk). Other swizzles are not modelled.
    pub fn cp_row(&self, row: u32) -> Result<u32, DescError> {
        self.require_base_offset_zero()?;
        if self.swizzle != Swizzle::None {
            return Err(DescError::Unsupported(format!(
                "swizzle {:?} for a tcgen05.cp source is not modelled (only no swizzle)",
                self.swizzle
            )));
        }
        Ok(self.start + (row / 8) * self.sbo + (row % 8) * 16)
    }
}

/// An e2m1 code (bit 3 sign, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6) times two: an integer
/// in -12..=12, so dot products of codes are exact integers.
pub fn e2m1_times2(code: u8) -> i8 {
    const MAG: [i8; 8] = [0, 1, 2, 3, 4, 6, 8, 12];
    let m = MAG[(code & 7) as usize];
    if code & 8 != 0 { -m } else { m }
}

/// A scale factor's value (exact in f64; NaN for the NaN codes).
///
/// * ue4m3 (PTX ISA §5.2.3 "Alternate Floating-Point Data Formats"): a 7-bit unsigned format,
///   4 exponent bits (bias 7) and 3 mantissa bits, no infinity, NaN only `0x7F`, stored in a
///   byte "having MSB bit padded with zero". So `0eeeemmm`: subnormals `m · 2^-9`, normals
///   `1.m · 2^(e-7)` (max 448). A set bit 7 breaks the encoding rule: Err, never a guess
///   (the hardware might ignore it, or read an e4m3 sign).
/// * ue8m0 (same section): 8 exponent bits, `2^(x - 127)`, no infinity, NaN only `0xFF`.
pub fn scale_value(byte: u8, format: ScaleFormat) -> Result<f64, String> {
    match format {
        ScaleFormat::Ue4m3 => {
            if byte & 0x80 != 0 {
                return Err(format!(
                    "ue4m3 scale factor {byte:#04x} has bit 7 set: ue4m3 is a 7-bit format whose byte must have its MSB \
                     zero (PTX ISA 5.2.3; an e4m3 sign bit left in a scale?)"
                ));
            }
            let e = i32::from(byte >> 3);
            let m = f64::from(byte & 7);
            Ok(match (e, byte & 7) {
                (15, 7) => f64::NAN,
                (0, _) => m * 2f64.powi(-9),
                _ => (8.0 + m) * 2f64.powi(e - 10),
            })
        }
        ScaleFormat::Ue8m0 => Ok(if byte == 0xFF { f64::NAN } else { 2f64.powi(i32::from(byte) - 127) }),
    }
}

/// `table[x << 8 | y]`: the dot product of the two packed e2m1 pairs of bytes `x` and `y`
/// (low nibble with low nibble, high with high), in doubled codes (so an exact integer).
fn byte_pair_products() -> &'static [i16; 1 << 16] {
    static TABLE: std::sync::OnceLock<Box<[i16; 1 << 16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0i16; 1 << 16]);
        for (i, v) in t.iter_mut().enumerate() {
            let (x, y) = ((i >> 8) as u8, i as u8);
            let lo = i16::from(e2m1_times2(x & 0xF)) * i16::from(e2m1_times2(y & 0xF));
            let hi = i16::from(e2m1_times2(x >> 4)) * i16::from(e2m1_times2(y >> 4));
            *v = lo + hi;
        }
        t
    })
}

/// The arithmetic of one `tcgen05.mma ... .kind::mxf4nvf4.block_scale.scale_vec::4X` (PTX ISA
/// §9.7.16.10.9 "tcgen05.mma", block scaling §9.7.16.10.7):
/// `D[m][n] = (accumulate ? D[m][n] : 0) + Σ_k A[m][k]·SFA[m][k/16] · B[n][k]·SFB[n][k/16]`
/// over the instruction's 64 k.
///
/// * `a`: 128 rows × 32 bytes, `b`: `n` rows × 32 bytes; packed e2m1, the low nibble of byte
///   j is element 2j (the even k), the high nibble element 2j + 1.
/// * `sfa`: 128 × 4 scale values, `sfb`: `n` × 4 (block s covers k in 16s..16s+16).
/// * `d`: 128 × `n` f32, row-major.
///
/// Numerics — the model's choice, stated because the hardware's internal rounding is not
/// documented: each 16-element block's dot product of codes is an exact integer; it is scaled
/// by its two scale factors exactly in f64; the four block terms and the incoming D are summed
/// in f64 and the result rounded once to f32 (round to nearest even). Whenever the f64 sum is
/// exact (always, unless the block terms span more than ~30 binades) this is the correctly
/// rounded f32 of the exact result; on the benchmark's inputs every partial sum is exact in f32
/// anyway. A NaN scale or a NaN input D gives the canonical NaN `0x7FFF_FFFF`. Negation
/// (`negate` = negate-A xor negate-B) negates the instruction's sum before it is added, so
/// a zero sum becomes -0 (the hardware's sign of zero is undocumented).
#[allow(clippy::too_many_arguments)]
pub fn mma_block_scale_4x(
    n: usize,
    a: &[u8],
    b: &[u8],
    sfa: &[f64],
    sfb: &[f64],
    negate: bool,
    d: &mut [f32],
    accumulate: bool,
) -> Result<(), String> {
    let rb = ROW_BYTES as usize;
    for (name, len, want) in [
        ("A", a.len(), MMA_M * rb),
        ("B", b.len(), n * rb),
        ("SFA", sfa.len(), MMA_M * 4),
        ("SFB", sfb.len(), n * 4),
        ("D", d.len(), MMA_M * n),
    ] {
        if len != want {
            return Err(format!("mxf4nvf4 m128n{n}k64: operand {name} has {len} elements, expected {want}"));
        }
    }
    let pairs = byte_pair_products();
    // Codes are doubled in the table: each product carries a factor 4.
    let sign = if negate { -0.25 } else { 0.25 };
    for ((d_row, a_row), sa) in d.chunks_exact_mut(n).zip(a.chunks_exact(rb)).zip(sfa.chunks_exact(4)) {
        // Row m's bytes as table row offsets, so the inner loop is one add per byte pair.
        let mut a_idx = [0usize; ROW_BYTES as usize];
        a_idx.iter_mut().zip(a_row).for_each(|(i, &x)| *i = usize::from(x) << 8);
        for ((dst, b_row), sb) in d_row.iter_mut().zip(b.chunks_exact(rb)).zip(sfb.chunks_exact(4)) {
            let mut sum = 0.0f64;
            for s in 0..4 {
                let bytes = SCALE_BLOCK / 2;
                let mut dot = 0i32;
                for (&i, &y) in a_idx[s * bytes..][..bytes].iter().zip(&b_row[s * bytes..][..bytes]) {
                    dot += i32::from(pairs[i | usize::from(y)]);
                }
                sum += f64::from(dot) * sa[s] * sb[s];
            }
            let total = if accumulate { f64::from(*dst) + sign * sum } else { sign * sum };
            *dst = if total.is_nan() { f32::from_bits(F32_CANONICAL_NAN) } else { total as f32 };
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2m1_codes() {
        let v: Vec<i8> = (0..16).map(e2m1_times2).collect();
        assert_eq!(v, [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]);
    }

    #[test]
    fn scale_values() {
        let e = ScaleFormat::Ue4m3;
        assert_eq!(scale_value(0x38, e), Ok(1.0));
        assert_eq!(scale_value(0x01, e), Ok(2f64.powi(-9)));
        assert_eq!(scale_value(0x07, e), Ok(7.0 * 2f64.powi(-9)));
        assert_eq!(scale_value(0x08, e), Ok(2f64.powi(-6)));
        assert_eq!(scale_value(0x7E, e), Ok(448.0));
        assert!(scale_value(0x7F, e).unwrap().is_nan());
        assert!(scale_value(0xB8, e).unwrap_err().contains("bit 7"));
        let u = ScaleFormat::Ue8m0;
        assert_eq!(scale_value(127, u), Ok(1.0));
        assert_eq!(scale_value(130, u), Ok(8.0));
        assert_eq!(scale_value(0, u), Ok(2f64.powi(-127)));
        assert!(scale_value(0xFF, u).unwrap().is_nan());
    }

    #[test]
    fn sw128_chunks_follow_the_absolute_address() {
        // start 0x400 (1024-aligned), SBO 1024, version 1, swizzle 2.
        let d = decode_smem_desc(0x4000_4040_0000_0040).unwrap();
        assert_eq!(d.start, 0x400);
        assert_eq!(d.sbo, 1024);
        assert_eq!(d.mma_operand_chunk(0, 0), Ok(0x400));
        assert_eq!(d.mma_operand_chunk(0, 1), Ok(0x410));
        assert_eq!(d.mma_operand_chunk(3, 0), Ok(0x400 + 3 * 128 + 3 * 16));
        // Row 9, chunk 1: chunk index 1 ^ (row % 8 = 1) = 0.
        assert_eq!(d.mma_operand_chunk(9, 1), Ok(0x400 + 1024 + 128));
        // The next K step: start + 32 gives chunks 2 and 3 of each row, swizzled.
        let d = decode_smem_desc(0x4000_4040_0000_0042).unwrap();
        assert_eq!(d.mma_operand_chunk(5, 0), Ok(0x400 + 5 * 128 + (2 ^ 5) * 16));
        assert_eq!(d.mma_operand_chunk(5, 1), Ok(0x400 + 5 * 128 + (3 ^ 5) * 16));
    }

    #[test]
    fn block_scaled_dot_product() {
        // Row 0 of A: k = 0 is 1.0 (code 2), k = 17 is -3 (code 0xD, high nibble of byte 8);
        // B row 0: all 2.0 (code 4). Scales: A block 0 = 2, block 1 = 0.5; B all 1.
        let mut a = vec![0u8; MMA_M * 32];
        a[0] = 0x02;
        a[8] = 0xD0;
        let b = vec![0x44u8; 8 * 32];
        let mut sfa = vec![1.0; MMA_M * 4];
        sfa[0] = 2.0;
        sfa[1] = 0.5;
        let sfb = vec![1.0; 8 * 4];
        let mut d = vec![10.0f32; MMA_M * 8];
        mma_block_scale_4x(8, &a, &b, &sfa, &sfb, false, &mut d, true).unwrap();
        // 10 + 1·2·2 + (-3)·0.5·2 = 11.
        assert_eq!(d[0], 11.0);
        assert_eq!(d[8], 10.0);
        mma_block_scale_4x(8, &a, &b, &sfa, &sfb, true, &mut d, false).unwrap();
        assert_eq!(d[0], -1.0);
    }
}
#[cfg(test)]
mod bench {
    /// Time of one m128n256k64 (`cargo test -p emu --lib bench -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn bench_mma_n256() {
        use super::*;
        let a: Vec<u8> = (0..128 * 32).map(|i| (i * 37 % 251) as u8).collect();
        let b: Vec<u8> = (0..256 * 32).map(|i| (i * 91 % 241) as u8).collect();
        let sfa = vec![1.0; 128 * 4];
        let sfb = vec![0.5; 256 * 4];
        let mut d = vec![0f32; 128 * 256];
        let t = std::time::Instant::now();
        for _ in 0..200 {
            mma_block_scale_4x(256, &a, &b, &sfa, &sfb, false, &mut d, true).unwrap();
        }
        eprintln!("{:?} per m128n256k64", t.elapsed() / 200);
    }
}
