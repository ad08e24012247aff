//! Named CTA barriers (PTX ISA 9.7.13.1 `bar`).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `bar.sync id, threads;` — waits until `threads` threads (a multiple of 32) have
/// arrived at barrier `id`; orders their earlier shared-memory accesses before the
/// later ones.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn sync(id: u32, threads: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier; every participating thread executes it.
    unsafe {
        asm!("bar.sync {}, {};", in(reg32) id, in(reg32) threads, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::barrier::sync(id, threads)
}
