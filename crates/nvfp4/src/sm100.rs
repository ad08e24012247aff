//! Blackwell (sm_100a) tcgen05 descriptors: the 64-bit shared-memory matrix descriptor
//! (PTX ISA Table 40) and the 32-bit instruction descriptor of `kind::mxf4nvf4` (Table 44).
//!
//! # Shared-memory descriptor
//!
//! | bits  | field                                                                      |
//! |-------|----------------------------------------------------------------------------|
//! | 0-13  | start address `(addr & 0x3FFFF) >> 4`                                      |
//! | 16-29 | leading dimension byte offset (LBO) >> 4                                   |
//! | 32-45 | stride dimension byte offset (SBO) >> 4                                    |
//! | 46-48 | fixed `0b001` (the sm_100 descriptor version; sm_90 has 0 here)            |
//! | 49-51 | base offset (0 when the tile starts on its swizzle repeat boundary)        |
//! | 52    | LBO mode: 0 = relative offset                                              |
//! | 61-63 | swizzle: 0 none, 1 = 128B with 32B atomicity, 2 = 128B, 4 = 64B, 6 = 32B   |
//!
//! The swizzle codes differ from wgmma's (where 128B is 1), so an sm_90 descriptor cannot be
//! reused. NVFP4 operands are packed two values per byte in shared memory (`kind::mxf4nvf4`),
//! so a 128-byte swizzle row holds 256 values: 4 MMAs of K = 64, each 32 bytes further on
//! ([`SmemDesc::advance`]`(32)`).
//!
//! # Instruction descriptor
//!
//! | bits  | field (value for NVFP4, dense, K-major)                                 |
//! |-------|-------------------------------------------------------------------------|
//! | 0-1   | sparsity selector: 0                                                    |
//! | 2     | sparsity: 0 = dense                                                     |
//! | 4-5   | scale-factor ID of B: 0 (4X)                                            |
//! | 7-9   | A format: E2M1 = 1 (the f8f6f4 kinds number E2M1 as 5)                  |
//! | 10-11 | B format: E2M1 = 1                                                      |
//! | 13/14 | negate A / B: 0                                                         |
//! | 15/16 | A / B major: 0 = K-major (the only choice for 4-bit types)              |
//! | 17-22 | N >> 3                                                                  |
//! | 23    | scale type of SFA and SFB: UE4M3 = 0, UE8M0 = 1                         |
//! | 27-28 | M >> 7                                                                  |
//! | 29-30 | scale-factor ID of A: 0 (4X)                                            |
//! | 31    | K: 0 = dense K = 64                                                     |
//!
//! Bits 4-5 are the D type in the `kind::f16` descriptor: copying that one in sets SFB ID = 1,
//! which is illegal for 4X scales.
//!
//! ```
//! use nvfp4::sm100::InstrDesc;
//! const IDESC: InstrDesc = InstrDesc::nvfp4(128, 256);
//! assert_eq!(IDESC.0, 0x0840_0480);
//! ```

use crate::swizzle::Swizzle;

/// Shared-window addresses are 18 bits (256 KiB); the PTX `matrix-descriptor-encode(x)` is
/// `(x & 0x3FFFF) >> 4`, applied to the start address, the LBO and the SBO alike.
const ADDR_MASK: u32 = 0x3FFFF;
/// Width mask of the three 14-bit fields (start, LBO, SBO), in 16-byte units.
const FIELD_MASK: u64 = 0x3FFF;
const START_SHIFT: u32 = 0;
const LBO_SHIFT: u32 = 16;
const SBO_SHIFT: u32 = 32;
const VERSION_SHIFT: u32 = 46;
/// The descriptor version of sm_100 (CUTLASS `version_ = 1`).
const VERSION_SM100: u64 = 0b001;
const BASE_OFFSET_SHIFT: u32 = 49;
const BASE_OFFSET_MASK: u64 = 0x7;
const SWIZZLE_SHIFT: u32 = 61;
const SWIZZLE_MASK: u64 = 0x7;

/// `matrix-descriptor-encode`: a 16-byte-aligned shared-window byte count or address, in
/// 16-byte units (14 bits).
#[inline]
const fn encode(bytes: u32) -> u64 {
    ((bytes & ADDR_MASK) >> 4) as u64
}

/// The tcgen05 swizzle-mode code of a swizzle.
#[inline]
const fn swizzle_mode(swizzle: Swizzle) -> u64 {
    match swizzle {
        Swizzle::None => 0,
        Swizzle::B128 => 2,
        Swizzle::B64 => 4,
        Swizzle::B32 => 6,
    }
}

/// A tcgen05 shared-memory matrix descriptor.
/// bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 46-48 fixed 0b001, 49-51 base offset,
/// 52 LBO mode (0 = relative), 61-63 swizzle (0 none, 1 128B with 32B atom, 2 128B, 4 64B, 6 32B).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct SmemDesc(pub u64);

impl SmemDesc {
    /// Descriptor of a K-major operand at shared-window address `start` (16-byte aligned),
    /// with leading / stride byte offsets `lbo` / `sbo` (16-byte multiples), base offset 0,
    /// relative LBO. For a 128B-swizzled tile of 128-byte rows: SBO = 1024, LBO unused (0).
    ///
    /// Never panics: addresses are masked to the 256 KiB shared window and the low 4 bits are
    /// dropped, as the hardware encoding does.
    #[inline]
    pub const fn new(start: u32, lbo: u32, sbo: u32, swizzle: Swizzle) -> SmemDesc {
        let mut desc = 0;
        desc |= encode(start) << START_SHIFT; // bits  0-13: start address >> 4
        // bits 14-15: reserved, 0
        desc |= encode(lbo) << LBO_SHIFT; // bits 16-29: leading dimension byte offset >> 4
        // bits 30-31: reserved, 0
        desc |= encode(sbo) << SBO_SHIFT; // bits 32-45: stride dimension byte offset >> 4
        desc |= VERSION_SM100 << VERSION_SHIFT; // bits 46-48: fixed 0b001 (sm_100 version)
        // bits 49-51: base offset 0: the tile starts on its repeat boundary (with_base_offset)
        // bit 52: LBO mode 0, the LBO is a relative byte offset
        // bits 53-60: fixed 0
        desc |= swizzle_mode(swizzle) << SWIZZLE_SHIFT; // bits 61-63: swizzle mode (2 = 128B)
        SmemDesc(desc)
    }

    /// The descriptor `tcgen05.cp .32x128b.warpx4` reads a 512-byte blocked scale tile with:
    /// no swizzle, SBO = 128 B (8 rows x 16 B), LBO = 0.
    #[inline]
    pub const fn scale_tile(start: u32) -> SmemDesc {
        SmemDesc::new(start, 0, 128, Swizzle::None)
    }

    /// The same descriptor with the base-offset field set (0..=7; higher bits are dropped).
    /// For a swizzle pattern that starts at address `p` off its repeat boundary the PTX ISA
    /// gives `(p >> 7) & 7`.
    #[inline]
    pub const fn with_base_offset(self, base_offset: u32) -> SmemDesc {
        let cleared = self.0 & !(BASE_OFFSET_MASK << BASE_OFFSET_SHIFT);
        SmemDesc(cleared | (base_offset as u64 & BASE_OFFSET_MASK) << BASE_OFFSET_SHIFT)
    }

    /// The descriptor of the same matrix starting `bytes` (a multiple of 16) later: the
    /// start-address field + bytes/16, everything else unchanged (the K = 64 step inside a
    /// 128B atom is 32 bytes). The sum wraps within the 14-bit field.
    #[inline]
    pub const fn advance(self, bytes: u32) -> SmemDesc {
        let start = ((self.0 >> START_SHIFT) + (bytes >> 4) as u64) & FIELD_MASK;
        SmemDesc(self.0 & !(FIELD_MASK << START_SHIFT) | start << START_SHIFT)
    }

    /// The start address, in bytes (within the shared window).
    #[inline]
    pub const fn start(self) -> u32 {
        (((self.0 >> START_SHIFT) & FIELD_MASK) << 4) as u32
    }

    /// The leading dimension byte offset.
    #[inline]
    pub const fn lbo(self) -> u32 {
        (((self.0 >> LBO_SHIFT) & FIELD_MASK) << 4) as u32
    }

    /// The stride dimension byte offset.
    #[inline]
    pub const fn sbo(self) -> u32 {
        (((self.0 >> SBO_SHIFT) & FIELD_MASK) << 4) as u32
    }

    /// The base-offset field (0..=7).
    #[inline]
    pub const fn base_offset(self) -> u32 {
        ((self.0 >> BASE_OFFSET_SHIFT) & BASE_OFFSET_MASK) as u32
    }

    /// The swizzle of the swizzle-mode field, or `None` for a code with no [`Swizzle`]:
    /// 1 (128B with 32-byte atomicity, not valid for K-major operands) and the invalid 3, 5
    /// and 7. [`SmemDesc::new`] never produces those.
    #[inline]
    pub const fn swizzle(self) -> Option<Swizzle> {
        match (self.0 >> SWIZZLE_SHIFT) & SWIZZLE_MASK {
            0 => Some(Swizzle::None),
            2 => Some(Swizzle::B128),
            4 => Some(Swizzle::B64),
            6 => Some(Swizzle::B32),
            _ => None,
        }
    }
}

/// Scale-factor element type of a block-scaled MMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleType {
    /// Unsigned e4m3 (NVFP4: one scale per 16 values, `scale_vec::4X`).
    Ue4m3,
    /// Unsigned e8m0, a power of two (MXFP4: one scale per 32 values).
    Ue8m0,
}

/// E2M1 in the A/B format fields of the mxf4 / mxf4nvf4 instruction descriptor.
const FORMAT_E2M1: u32 = 1;
const A_FORMAT_SHIFT: u32 = 7;
const B_FORMAT_SHIFT: u32 = 10;
const N_SHIFT: u32 = 17;
const N_MASK: u32 = 0x3F;
const SCALE_TYPE_SHIFT: u32 = 23;
const M_SHIFT: u32 = 27;
const M_MASK: u32 = 0x3;

/// The instruction descriptor of `tcgen05.mma.kind::mxf4nvf4.block_scale` (dense, K-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct InstrDesc(pub u32);

impl InstrDesc {
    /// E2M1 x E2M1, UE4M3 scales (NVFP4), K-major A and B, no negation, SF ids 0, dense K=64.
    /// `m` is 128 (cta_group::1) or 256 (cta_group::2); `n` a multiple of 8 in 8..=256.
    ///
    /// # Panics
    /// On a shape the instruction does not have: `m` not 128 or 256, `n` not a multiple of 8
    /// in 8..=256, or `m` = 256 with `n` not a multiple of 16. Build it in a constant
    /// (`const IDESC: InstrDesc = InstrDesc::nvfp4(128, BN);`) so the check runs at compile
    /// time and no panic reaches a kernel.
    #[inline]
    pub const fn nvfp4(m: u32, n: u32) -> InstrDesc {
        assert!(m == 128 || m == 256, "tcgen05 block-scaled MMA: M must be 128 or 256");
        assert!(
            n.is_multiple_of(8) && n >= 8 && n <= 256,
            "tcgen05 block-scaled MMA: N must be a multiple of 8 in 8..=256"
        );
        assert!(m == 128 || n.is_multiple_of(16), "tcgen05 block-scaled MMA: M = 256 needs N % 16 == 0");
        let mut desc = 0;
        // bits 0-1: sparsity selector 0; bit 2: dense; bit 3: reserved
        // bits 4-5: scale-factor ID of B, 0 (4X scales sit at 32-bit aligned columns)
        // bit 6: reserved
        desc |= FORMAT_E2M1 << A_FORMAT_SHIFT; // bits  7-9: A format E2M1 (= 1 in mxf4 tables)
        desc |= FORMAT_E2M1 << B_FORMAT_SHIFT; // bits 10-11: B format E2M1 (bit 12 reserved)
        // bits 13-14: no negation of A, B
        // bits 15-16: A and B K-major (4-bit types cannot be transposed)
        desc |= (n >> 3) << N_SHIFT; // bits 17-22: N >> 3
        // bit 23: scale type UE4M3 = 0 (with_scale_type)
        // bits 24-26: reserved
        desc |= (m >> 7) << M_SHIFT; // bits 27-28: M >> 7
        // bits 29-30: scale-factor ID of A, 0
        // bit 31: dense K = 64 (1 = K 96, sm_103a only)
        InstrDesc(desc)
    }

    /// The same descriptor with the scale type of both SFA and SFB set (bit 23).
    #[inline]
    pub const fn with_scale_type(self, t: ScaleType) -> InstrDesc {
        let bit = match t {
            ScaleType::Ue4m3 => 0,
            ScaleType::Ue8m0 => 1,
        };
        InstrDesc(self.0 & !(1 << SCALE_TYPE_SHIFT) | bit << SCALE_TYPE_SHIFT)
    }

    /// The scale type of bit 23.
    #[inline]
    pub const fn scale_type(self) -> ScaleType {
        if self.0 >> SCALE_TYPE_SHIFT & 1 == 0 { ScaleType::Ue4m3 } else { ScaleType::Ue8m0 }
    }

    /// M, from bits 27-28.
    #[inline]
    pub const fn m(self) -> u32 {
        ((self.0 >> M_SHIFT) & M_MASK) << 7
    }

    /// N, from bits 17-22.
    #[inline]
    pub const fn n(self) -> u32 {
        ((self.0 >> N_SHIFT) & N_MASK) << 3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sm100-tcgen05.md §3, checked against a replica of CUTLASS `UMMA::SmemDescriptor`.
    #[test]
    fn smem_desc_worked_values() {
        let a = SmemDesc::new(0x400, 0, 1024, Swizzle::B128);
        assert_eq!(a.0, 0x4000404000000040);
        assert_eq!(a.advance(32).0, 0x4000404000000042);
        assert_eq!(SmemDesc::new(0, 16, 1024, Swizzle::B128).0, 0x4000404000010000);
        // The four K = 64 steps of one 128B atom.
        for j in 0..4 {
            assert_eq!(a.advance(32 * j).0, 0x4000404000000040 + 2 * j as u64);
        }
    }

    #[test]
    fn scale_tile_desc() {
        for addr in [0u32, 0x400, 0x2400, 0x8200, 0x18000, 0x3FE00] {
            let d = SmemDesc::scale_tile(addr);
            assert_eq!(d.0, 0x0000400800000000 | (addr >> 4) as u64, "{addr:#x}");
            assert_eq!((d.start(), d.lbo(), d.sbo()), (addr, 0, 128));
            assert_eq!(d.swizzle(), Some(Swizzle::None));
            // The next tile of a contiguous run of blocked scale tiles.
            assert_eq!(d.advance(512), SmemDesc::scale_tile((addr + 512) & 0x3FFFF));
        }
    }

    #[test]
    fn smem_desc_accessors_round_trip() {
        for swizzle in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            for (start, lbo, sbo) in [(0x400, 16, 1024), (0x3FFF0, 0x3FFF0, 0x3FFF0), (0, 0, 0)] {
                let d = SmemDesc::new(start, lbo, sbo, swizzle);
                assert_eq!((d.start(), d.lbo(), d.sbo()), (start, lbo, sbo));
                assert_eq!(d.swizzle(), Some(swizzle));
                assert_eq!(d.base_offset(), 0);
                assert_eq!(d.0 >> 46 & 0b111, 0b001, "version bits");
                assert_eq!(d.0 >> 52 & 1, 0, "LBO mode");
                for base in 0..8 {
                    let with = d.with_base_offset(base);
                    assert_eq!(with.base_offset(), base);
                    assert_eq!(with.with_base_offset(0), d);
                    assert_eq!((with.start(), with.lbo(), with.sbo()), (start, lbo, sbo));
                }
            }
        }
        let codes = [0u64, 2, 4, 6].map(|c| SmemDesc(c << 61).swizzle());
        assert_eq!(codes, [Swizzle::None, Swizzle::B128, Swizzle::B64, Swizzle::B32].map(Some));
        for invalid in [1u64, 3, 5, 7] {
            assert_eq!(SmemDesc(invalid << 61).swizzle(), None);
        }
    }

    /// sm100-tcgen05.md §2, checked against a replica of CUTLASS `InstrDescriptorBlockScaled`.
    #[test]
    fn instr_desc_worked_values() {
        assert_eq!(InstrDesc::nvfp4(128, 128).0, 0x08200480);
        assert_eq!(InstrDesc::nvfp4(128, 256).0, 0x08400480);
        assert_eq!(InstrDesc::nvfp4(128, 64).0, 0x08100480);
        assert_eq!(InstrDesc::nvfp4(128, 8).0, 0x08020480);
        assert_eq!(InstrDesc::nvfp4(256, 256).0, 0x10400480);
        let mx = InstrDesc::nvfp4(128, 128).with_scale_type(ScaleType::Ue8m0);
        assert_eq!(mx.0, 0x08A00480);
        assert_eq!(mx.scale_type(), ScaleType::Ue8m0);
        assert_eq!(mx.with_scale_type(ScaleType::Ue4m3), InstrDesc::nvfp4(128, 128));
        assert_eq!(InstrDesc::nvfp4(128, 128).scale_type(), ScaleType::Ue4m3);
        // The hand-packed formula of the design note.
        for n in (8..=256).step_by(8) {
            let want = (1 << 7) | (1 << 10) | ((n >> 3) << 17) | (1 << 27);
            assert_eq!(InstrDesc::nvfp4(128, n).0, want, "n {n}");
        }
    }

    #[test]
    fn instr_desc_m_n_round_trip() {
        for n in (8..=256).step_by(8) {
            let d = InstrDesc::nvfp4(128, n);
            assert_eq!((d.m(), d.n()), (128, n));
            // Nothing in the fields that must stay 0: SF ids, negate, major, sparsity, K.
            assert_eq!(d.0 & 0xE781_F07F, 0);
        }
        for n in (16..=256).step_by(16) {
            let d = InstrDesc::nvfp4(256, n);
            assert_eq!((d.m(), d.n()), (256, n));
        }
    }

    #[test]
    #[should_panic(expected = "M must be 128 or 256")]
    fn instr_desc_rejects_m_64() {
        InstrDesc::nvfp4(64, 128);
    }

    #[test]
    #[should_panic(expected = "N must be a multiple of 8")]
    fn instr_desc_rejects_n_264() {
        InstrDesc::nvfp4(128, 264);
    }

    #[test]
    #[should_panic(expected = "N must be a multiple of 8")]
    fn instr_desc_rejects_n_12() {
        InstrDesc::nvfp4(128, 12);
    }

    #[test]
    #[should_panic(expected = "N % 16")]
    fn instr_desc_rejects_m_256_n_24() {
        InstrDesc::nvfp4(256, 24);
    }
}
