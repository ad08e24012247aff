//! The `nvfp4::sm100` descriptor builders and the writer-side layouts (SW128 swizzle, blocked
//! scales), read back through the emulator's independent decoding of the PTX tables: a
//! misunderstanding in either shows up here rather than as garbage in a Blackwell run.

use emu::model::tcgen05::{ScaleFormat, Swizzle as EmuSwizzle, decode_idesc, decode_smem_desc};
use nvfp4::layout;
use nvfp4::sm100::{InstrDesc, ScaleType, SmemDesc};
use nvfp4::swizzle::Swizzle;

#[test]
fn instruction_descriptors_decode_as_built() {
    for n in (8..=256).step_by(8) {
        let d = decode_idesc(InstrDesc::nvfp4(128, n).0).unwrap_or_else(|e| panic!("N = {n}: {e}"));
        assert_eq!((d.m, d.n, d.scale, d.negate_a, d.negate_b), (128, n, ScaleFormat::Ue4m3, false, false));
        let d = decode_idesc(InstrDesc::nvfp4(128, n).with_scale_type(ScaleType::Ue8m0).0).unwrap();
        assert_eq!((d.n, d.scale), (n, ScaleFormat::Ue8m0));
    }
}

/// A 1024-aligned SW128 operand tile written with `Swizzle::B128.apply` (what a kernel's
/// copy does) is exactly what the emulator's MMA reads, for each of the 4 K steps reached
/// with `advance(32 * k)`, whatever the (ignored) LBO.
#[test]
fn sw128_operands_read_where_they_are_written() {
    for (tile, lbo) in [(0x400, 0), (0x2400, 16)] {
        let desc = SmemDesc::new(tile, lbo, 1024, Swizzle::B128);
        for k in 0..4 {
            let d = decode_smem_desc(desc.advance(32 * k).0).unwrap();
            assert_eq!((d.start, d.sbo, d.swizzle), (tile + 32 * k, 1024, EmuSwizzle::Sw128));
            for row in 0..256 {
                for chunk in 0..2 {
                    let logical = tile + (row / 8) * 1024 + (row % 8) * 128 + 32 * k + 16 * chunk;
                    assert_eq!(
                        d.mma_operand_chunk(row, chunk),
                        Ok(Swizzle::B128.apply(logical)),
                        "tile {tile:#x}, K step {k}, row {row}, chunk {chunk}"
                    );
                }
            }
        }
    }
}

/// One 512-byte blocked scale tile: its scale (r, j) lands, through `tcgen05.cp
/// .32x128b.warpx4` with `SmemDesc::scale_tile`, in lane r % 32, column r / 32, byte j —
/// where the emulator's MMA reads row r's scale for K block j.
#[test]
fn blocked_scale_tiles_land_where_the_mma_reads_them() {
    let d = decode_smem_desc(SmemDesc::scale_tile(0x8400).0).unwrap();
    assert_eq!(d.swizzle, EmuSwizzle::None);
    for row in 0..32 {
        assert_eq!(d.cp_row(row), Ok(0x8400 + 16 * row));
    }
    for r in 0..128 {
        for j in 0..4 {
            let offset = layout::offset(r, j, 4) as u32;
            // cp: source row offset/16 goes to lane offset/16 (and its replicas), its bytes
            // 4c..4c+3 to column c.
            let (lane, column, byte) = (offset / 16, (offset % 16) / 4, offset % 4);
            assert_eq!((lane, column, byte), (r % 32, r / 32, j), "scale ({r}, {j})");
        }
    }
}
