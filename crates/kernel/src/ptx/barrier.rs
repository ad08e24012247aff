//! Named CTA barriers (PTX ISA 9.7.13.1 `bar`).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `bar.sync id, threads;` — waits until `threads` threads (a multiple of 32) have
/// arrived at barrier `id`; orders their earlier shared-memory accesses before the
/// later ones. Aligned: after code that some lanes of a warp skip (`if tid == 0 { .. }`)
/// it is safe only while LLVM keeps one copy of it, which the entry's PTX shows; a reduce
/// that polled from thread 0 before it got two and hung an H100 (docs/perf-notes.md,
/// session 39). New code of that shape uses [`sync_unaligned`].
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

/// `barrier.sync id, threads;` — [`sync`] without `.aligned`: defined even when the
/// threads of a warp reach it at different instructions. `bar.sync` is
/// `barrier.sync.aligned`, undefined unless every thread executes the same instruction;
/// LLVM does not treat an `asm!` block as convergent and may duplicate a barrier that
/// follows an `if tid == 0 { .. }` into both arms (seen in the probes' PTX), so code
/// with a divergent branch right before its barrier uses this form.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn sync_unaligned(id: u32, threads: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier; every participating thread executes it.
    unsafe {
        asm!("barrier.sync {}, {};", in(reg32) id, in(reg32) threads, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::barrier::sync(id, threads)
}

/// `bar.warp.sync 0xffffffff;` — waits until all 32 lanes of the warp arrive; orders their
/// earlier shared-memory accesses (their landed `cp.async` copies included, after each
/// lane's `cp.async.wait_group`) before the later ones.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn warp_sync() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a warp barrier; all 32 lanes execute it.
    unsafe {
        asm!("bar.warp.sync 0xffffffff;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::warp::warp_sync()
}
