//! Byte permutes and byte dot products (PTX ISA 9.7.9.7 `prmt`, 9.7.1.23 `dp4a`): the
//! integer arithmetic of the CUDA-core decode kernel.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `prmt.b32 d, a, b, selector;` — each byte i of the result is the byte of the 8-byte
/// source {b, a} (a's bytes 0-3, b's 4-7) that the low three bits of selector nibble i
/// (bits 4i..4i+3, i < 4) index; when the nibble's bit 3 is set, that byte's top bit
/// replicated instead (0x00 or 0xFF). One SASS `PRMT`: an 8-entry byte table lookup.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn prmt(a: u32, b: u32, selector: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("prmt.b32 {}, {}, {}, {};", out(reg32) r, in(reg32) a, in(reg32) b, in(reg32) selector, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::integer::prmt_b32(a, b, selector)
    }
}

/// `dp4a.s32.s32 d, a, b, c;` — `c` plus the products of the four signed bytes of `a` and
/// `b` at the same positions: four exact integer multiply-adds in one instruction.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn dp4a(a: u32, b: u32, c: i32) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: i32;
        // SAFETY: register-only arithmetic.
        unsafe {
            asm!("dp4a.s32.s32 {}, {}, {}, {};", out(reg32) r, in(reg32) a, in(reg32) b, in(reg32) c, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emu::ops::integer::dp4a_s32(a, b, c)
    }
}
