//! Shared-memory swizzles: the 16-byte chunk index XORed with the row inside the pattern,
//! applied to absolute shared-window byte addresses (CuTe `Swizzle<B,4,3>`).
//!
//! A swizzled operand is stored in atoms of 8 rows of [`Swizzle::row_bytes`] each; inside
//! a row the 16-byte chunk `c` of row `r` is stored at chunk `c ^ (r % 8)` (B128; B64 and B32
//! use fewer bits). The tensor cores and TMA compute this from address bits, not from an
//! offset inside the tile, so a tile must start on a [`Swizzle::repeat_bytes`] boundary (or
//! its descriptor must carry a base offset). Spreading the chunks of one logical column over
//! the banks is what lets 8 rows be read without bank conflicts.
//!
//! For a 1024-byte aligned fp16 tile with 128-byte rows, element (r, k) sits at
//! `128*r + 16*((k/8) ^ (r%8)) + 2*(k%8)`.

/// The swizzle modes both tensor-core generations know. Their descriptor encodings differ:
/// see [`crate::sm90::SmemDesc`] (2-bit layout type) and [`crate::sm100::SmemDesc`] (3-bit
/// swizzle mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// No swizzle: "interleaved" core matrices of 8 rows x 16 bytes.
    None,
    /// 32-byte rows: address bit 4 ^= bit 7.
    B32,
    /// 64-byte rows: address bits `[4:5] ^= [7:8]`.
    B64,
    /// 128-byte rows: address bits `[4:6] ^= [7:9]` (CuTe `Swizzle<3,4,3>`).
    B128,
}

impl Swizzle {
    /// Bytes per row of the swizzle atom (16 for None = one core-matrix row, then 32/64/128).
    #[inline]
    pub const fn row_bytes(self) -> u32 {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// Bytes after which the pattern repeats (8 rows): 256, 512, 1024 (128 for None).
    #[inline]
    pub const fn repeat_bytes(self) -> u32 {
        8 * self.row_bytes()
    }

    /// The physical address of logical shared-window address `addr`:
    /// B128 XORs bits `[4:6]` with bits `[7:9]`, B64 bits `[4:5]` with `[7:8]`, B32 bit 4 with
    /// bit 7.
    /// It is an involution: applying it twice gives `addr` back.
    #[inline]
    pub const fn apply(self, addr: u32) -> u32 {
        // The chunk bits that take part: 0 (None), bit 4, bits 4-5 or bits 4-6.
        let chunk_bits = (self.row_bytes() / 16 - 1) << 4;
        // Bits [7:7+n) moved down onto bits [4:4+n).
        addr ^ ((addr >> 3) & chunk_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Swizzle; 4] = [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128];

    #[test]
    fn b128_fp16_tile_worked_values() {
        for base in [0u32, 0x400, 0x2400, 0x18000] {
            for r in 0..64 {
                for k in 0..64 {
                    let logical = base + 128 * r + 2 * k;
                    let want = base + 128 * r + 16 * ((k / 8) ^ (r % 8)) + 2 * (k % 8);
                    assert_eq!(Swizzle::B128.apply(logical), want, "base {base:#x} r {r} k {k}");
                }
            }
        }
        // Row 1's chunk 0 and chunk 1 trade places; row 0 is untouched.
        assert_eq!(Swizzle::B128.apply(0x80), 0x90);
        assert_eq!(Swizzle::B128.apply(0x90), 0x80);
        assert_eq!(Swizzle::B128.apply(0x70), 0x70);
        assert_eq!(Swizzle::B128.apply(0x3F0 + 0x5), 0x385);
    }

    #[test]
    fn apply_is_an_involution_within_16_byte_chunks() {
        for s in ALL {
            for addr in 0..(1 << 16) {
                let physical = s.apply(addr);
                assert_eq!(s.apply(physical), addr, "{s:?} {addr:#x}");
                // Only chunk bits move: byte within the chunk, row and atom stay.
                assert_eq!(physical & !0x70, addr & !0x70, "{s:?} {addr:#x}");
            }
        }
    }

    #[test]
    fn b64_and_b32_spot_checks() {
        // B64: bits [4:5] ^= bits [7:8].
        assert_eq!(Swizzle::B64.apply(0x080), 0x090);
        assert_eq!(Swizzle::B64.apply(0x100), 0x120);
        assert_eq!(Swizzle::B64.apply(0x190), 0x1A0);
        assert_eq!(Swizzle::B64.apply(0x1B7), 0x187);
        assert_eq!(Swizzle::B64.apply(0x240), 0x240, "bit 9 is not part of B64");
        assert_eq!(Swizzle::B64.apply(0x2C0), 0x2D0);
        assert_eq!(Swizzle::B64.apply(0x040), 0x040, "bit 6 is never XORed");
        // B32: bit 4 ^= bit 7.
        assert_eq!(Swizzle::B32.apply(0x080), 0x090);
        assert_eq!(Swizzle::B32.apply(0x09F), 0x08F);
        assert_eq!(Swizzle::B32.apply(0x100), 0x100);
        assert_eq!(Swizzle::B32.apply(0x1A0), 0x1B0);
        assert_eq!(Swizzle::B32.apply(0x0E0), 0x0F0, "bits 5-6 are not part of B32");
    }

    #[test]
    fn none_is_identity() {
        for addr in (0..(1 << 18)).step_by(7) {
            assert_eq!(Swizzle::None.apply(addr), addr);
        }
        assert_eq!(Swizzle::None.apply(u32::MAX), u32::MAX);
    }

    #[test]
    fn atom_sizes() {
        assert_eq!(ALL.map(Swizzle::row_bytes), [16, 32, 64, 128]);
        assert_eq!(ALL.map(Swizzle::repeat_bytes), [128, 256, 512, 1024]);
        // The pattern repeats: shifting by repeat_bytes shifts the result the same.
        for s in ALL {
            for addr in 0..4096 {
                assert_eq!(s.apply(addr + s.repeat_bytes()), s.apply(addr) + s.repeat_bytes());
            }
        }
    }
}
