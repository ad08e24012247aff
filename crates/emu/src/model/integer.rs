//! Bit-exact models of the integer and byte-permute instructions the kernels use: `prmt`
//! (PTX ISA §9.7.9.7 "Data Movement and Conversion Instructions: prmt") and `dp4a`
//! (§9.7.1.23 "Integer Arithmetic Instructions: dp4a").

/// `prmt.b32 d, a, b, c;` in the default mode (no `.f4e`/`.b4e`/... modifier).
///
/// The bytes of `b` and `a` form an 8-byte source {b, a}: bytes 0-3 are `a`'s (byte 0 its
/// least significant), bytes 4-7 `b`'s. The four 4-bit selectors in `c[15:0]` pick the
/// bytes of `d`: selector i (bits 4i..4i+3) makes byte i. Its low three bits index the
/// source; its bit 3 is the sign mode: when set, byte i is the selected byte's most
/// significant bit replicated eight times (0x00 or 0xFF) instead of the byte itself.
/// `c[31:16]` is ignored.
pub fn prmt_b32(a: u32, b: u32, c: u32) -> u32 {
    let source = ((u64::from(b) << 32) | u64::from(a)).to_le_bytes();
    (0..4).fold(0, |d, i| {
        let selector = (c >> (4 * i)) & 0xF;
        let byte = source[(selector & 0x7) as usize];
        let byte = if selector & 0x8 == 0 {
            byte
        } else if byte & 0x80 == 0 {
            0x00
        } else {
            0xFF
        };
        d | (u32::from(byte) << (8 * i))
    })
}

/// `dp4a.s32.s32 d, a, b, c;`: `c` plus the four products of the sign-extended bytes of
/// `a` and `b` at the same positions, in 32-bit two's complement (wrapping).
pub fn dp4a_s32(a: u32, b: u32, c: i32) -> i32 {
    (0..4).fold(c, |d, i| {
        let (x, y) = ((a >> (8 * i)) as u8 as i8, (b >> (8 * i)) as u8 as i8);
        d.wrapping_add(i32::from(x) * i32::from(y))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prmt_selects_bytes_of_a_then_b() {
        let (a, b) = (0x4433_2211, 0x8877_6655);
        // Identity, reversal, and b's bytes.
        assert_eq!(prmt_b32(a, b, 0x3210), a);
        assert_eq!(prmt_b32(a, b, 0x0123), 0x1122_3344);
        assert_eq!(prmt_b32(a, b, 0x7654), b);
        // The upper half of the selector is ignored.
        assert_eq!(prmt_b32(a, b, 0xFFFF_3210), a);
    }

    #[test]
    fn prmt_sign_mode_replicates_the_top_bit() {
        let (a, b) = (0x7F80_0100u32, 0xFF00_8001u32);
        // Selector 8+i: byte i's msb replicated. Bytes: 00 01 80 7F | 01 80 00 FF.
        assert_eq!(prmt_b32(a, b, 0xBA98), 0x00FF_0000);
        assert_eq!(prmt_b32(a, b, 0xFEDC), 0xFF00_FF00);
    }

    #[test]
    fn dp4a_sign_extends_each_byte() {
        // (-1)(2) + (3)(-4) + (127)(127) + (-128)(-128) + 5.
        let a = u32::from_le_bytes([0xFF, 3, 127, 0x80]);
        let b = u32::from_le_bytes([2, 0xFC, 127, 0x80]);
        assert_eq!(dp4a_s32(a, b, 5), -2 - 12 + 127 * 127 + 128 * 128 + 5);
        assert_eq!(dp4a_s32(0, 0, i32::MIN), i32::MIN);
        assert_eq!(dp4a_s32(0x7F, 0x7F, i32::MAX), i32::MIN + 127 * 127 - 1, "wraps");
    }
}
