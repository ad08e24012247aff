//! Hopper (sm_90a) wgmma shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2).
//!
//! 64-bit, one field per line in [`SmemDesc::new`]:
//!
//! | bits  | field                                                                  |
//! |-------|------------------------------------------------------------------------|
//! | 0-13  | start address `(addr & 0x3FFFF) >> 4`                                  |
//! | 16-29 | leading dimension byte offset (LBO) >> 4                               |
//! | 32-45 | stride dimension byte offset (SBO) >> 4                                |
//! | 49-51 | base offset (0 when the tile starts on its swizzle repeat boundary)    |
//! | 62-63 | layout type: 0 interleave (no swizzle), 1 = 128B, 2 = 64B, 3 = 32B     |
//!
//! Everything else is 0; in particular bits 46-48 stay 0 (tcgen05 puts a fixed `0b001` there,
//! see [`crate::sm100::SmemDesc`]), and the swizzle codes are not the sm_100 ones.
//!
//! For a K-major 128B-swizzled tile stored as rows of 128 bytes, SBO = 1024 (one 8-row atom);
//! LBO is unused (any value works, 16 is the convention here). Step along K inside an atom
//! with [`SmemDesc::advance`] (+32 bytes per k16 step of fp16): the hardware swizzles the
//! absolute address, so the descriptor of a sub-tile is that of a matrix starting later.
//!
//! ```
//! use nvfp4::{sm90::SmemDesc, swizzle::Swizzle};
//! let a = SmemDesc::new(0x400, 16, 1024, Swizzle::B128);
//! assert_eq!(a.0, 0x4000_0040_0001_0040);
//! assert_eq!(a.advance(3 * 32).0, 0x4000_0040_0001_0046); // k-step 3
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
const BASE_OFFSET_SHIFT: u32 = 49;
const BASE_OFFSET_MASK: u64 = 0x7;
const LAYOUT_TYPE_SHIFT: u32 = 62;
const LAYOUT_TYPE_MASK: u64 = 0x3;

/// `matrix-descriptor-encode`: a 16-byte-aligned shared-window byte count or address, in
/// 16-byte units (14 bits).
#[inline]
const fn encode(bytes: u32) -> u64 {
    ((bytes & ADDR_MASK) >> 4) as u64
}

/// The wgmma layout-type code of a swizzle.
#[inline]
const fn layout_type(swizzle: Swizzle) -> u64 {
    match swizzle {
        Swizzle::None => 0,
        Swizzle::B128 => 1,
        Swizzle::B64 => 2,
        Swizzle::B32 => 3,
    }
}

/// A wgmma shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct SmemDesc(pub u64);

impl SmemDesc {
    /// Descriptor of a K-major operand at shared-window address `start` (16-byte aligned),
    /// with leading / stride byte offsets `lbo` / `sbo` (16-byte multiples), base offset 0.
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
        // bits 46-48: reserved, 0 on sm_90 (not the sm_100 version bits)
        // bits 49-51: base offset 0: the tile starts on its repeat boundary (with_base_offset)
        // bits 52-61: reserved, 0
        desc |= layout_type(swizzle) << LAYOUT_TYPE_SHIFT; // bits 62-63: layout type (1 = 128B)
        SmemDesc(desc)
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
    /// start-address field + bytes/16, everything else unchanged (the K step inside an atom).
    /// The sum wraps within the 14-bit field, like the 256 KiB shared window it addresses.
    #[inline]
    pub const fn advance(self, bytes: u32) -> SmemDesc {
        let start = ((self.0 >> START_SHIFT) + (bytes >> 4) as u64) & FIELD_MASK;
        SmemDesc(self.0 & !(FIELD_MASK << START_SHIFT) | start << START_SHIFT)
    }

    /// [`SmemDesc::advance`] for a start that stays inside the shared window (start +
    /// `bytes` < 256 KiB, true of every address a CTA owns): one add to the whole
    /// descriptor (one `UIADD3.64` on Hopper's uniform datapath), where `advance`'s wrap
    /// costs a kernel four instructions per wgmma (a 64-bit add and two masks). Past the
    /// window the sum would carry into the reserved bits 14-15 instead of wrapping.
    #[inline]
    pub const fn advance_in_window(self, bytes: u32) -> SmemDesc {
        debug_assert!((self.0 & FIELD_MASK) + (bytes >> 4) as u64 <= FIELD_MASK, "the start leaves the window");
        SmemDesc(self.0 + (bytes >> 4) as u64)
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

    /// The swizzle of the layout-type field (all four 2-bit codes are valid).
    #[inline]
    pub const fn swizzle(self) -> Swizzle {
        match (self.0 >> LAYOUT_TYPE_SHIFT) & LAYOUT_TYPE_MASK {
            0 => Swizzle::None,
            1 => Swizzle::B128,
            2 => Swizzle::B64,
            _ => Swizzle::B32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sm90-wgmma.md §1.4: values that produced correct wgmma results on an H100
    /// (LBO = 16, SBO = 1024, 128B swizzle).
    #[test]
    fn worked_values_from_the_h100_probe() {
        let a = SmemDesc::new(0x400, 16, 1024, Swizzle::B128);
        assert_eq!(a.0, 0x4000004000010040);
        assert_eq!(a.advance(96).0, 0x4000004000010046);
        let b = SmemDesc::new(0x2400, 16, 1024, Swizzle::B128);
        assert_eq!(b.0, 0x4000004000010240);
        let c = SmemDesc::new(0x18000, 16, 1024, Swizzle::B128);
        assert_eq!(c.0, 0x4000004000011800);
        assert_eq!(c.advance(64).0, 0x4000004000011804);
        // DeepGEMM style, LBO = 0.
        assert_eq!(SmemDesc::new(0x18000, 0, 1024, Swizzle::B128).0, 0x4000004000001800);
    }

    #[test]
    fn k_steps_of_the_probe() {
        let a = SmemDesc::new(0x400, 16, 1024, Swizzle::B128);
        let b = SmemDesc::new(0x2400, 16, 1024, Swizzle::B128);
        let a_steps = [0x4000004000010040, 0x4000004000010042, 0x4000004000010044, 0x4000004000010046];
        let b_steps = [0x4000004000010240, 0x4000004000010242, 0x4000004000010244, 0x4000004000010246];
        for j in 0..4 {
            assert_eq!(a.advance(32 * j).0, a_steps[j as usize]);
            assert_eq!(b.advance(32 * j).0, b_steps[j as usize]);
        }
        // Advancing in steps is advancing at once.
        assert_eq!(a.advance(32).advance(32).advance(32), a.advance(96));
        for j in 0..4 {
            assert_eq!(a.advance_in_window(32 * j), a.advance(32 * j));
        }
    }

    #[test]
    fn accessors_round_trip() {
        for swizzle in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            for (start, lbo, sbo) in [(0x400, 16, 1024), (0x3FFF0, 0x3FFF0, 0x3FFF0), (0, 0, 0)] {
                let d = SmemDesc::new(start, lbo, sbo, swizzle);
                assert_eq!((d.start(), d.lbo(), d.sbo()), (start, lbo, sbo));
                assert_eq!(d.swizzle(), swizzle);
                assert_eq!(d.base_offset(), 0);
                for base in 0..8 {
                    let with = d.with_base_offset(base);
                    assert_eq!(with.base_offset(), base);
                    assert_eq!(with.with_base_offset(0), d);
                    assert_eq!((with.start(), with.lbo(), with.sbo()), (start, lbo, sbo));
                    assert_eq!(with.swizzle(), swizzle);
                }
            }
        }
        assert_eq!(SmemDesc::new(0, 0, 0, Swizzle::None).0, 0);
        assert_eq!(SmemDesc::new(0, 0, 0, Swizzle::B64).0, 2 << 62);
        assert_eq!(SmemDesc::new(0, 0, 0, Swizzle::B32).0, 3 << 62);
        assert_eq!(SmemDesc(0).with_base_offset(7).0, 7 << 49);
    }

    #[test]
    fn fields_never_spill() {
        // Addresses are masked to the 256 KiB window; the low 4 bits are dropped.
        let d = SmemDesc::new(0xFFFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFF, Swizzle::None);
        assert_eq!(d.0, 0x0000_3FFF_3FFF_3FFF);
        assert_eq!(SmemDesc::new(0x4_0400, 0, 0, Swizzle::None).start(), 0x400);
        // advance wraps inside the start field.
        let top = SmemDesc::new(0x3FFF0, 16, 1024, Swizzle::B128);
        assert_eq!(top.advance(32), SmemDesc::new(0x10, 16, 1024, Swizzle::B128));
        assert_eq!(SmemDesc(0).with_base_offset(0xFF).0, 7 << 49);
    }

    #[test]
    fn advance_in_window_is_advance_without_the_wrap() {
        for start in (0..0x4_0000).step_by(16 * 37) {
            let d = SmemDesc::new(start, 16, 1024, Swizzle::B128).with_base_offset(3);
            for bytes in (0..=112).step_by(16) {
                if start + bytes < 0x4_0000 {
                    assert_eq!(d.advance_in_window(bytes), d.advance(bytes), "{start:#x} + {bytes}");
                }
            }
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "the start leaves the window")]
    fn advance_in_window_refuses_to_leave_the_window() {
        SmemDesc::new(0x3FFF0, 16, 1024, Swizzle::B128).advance_in_window(32);
    }
}
