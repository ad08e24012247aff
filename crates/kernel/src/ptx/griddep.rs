//! Programmatic dependent launch (PTX ISA 9.7.13.13 `griddepcontrol`, sm_90+).
//!
//! A launch made with the driver's programmatic stream serialization attribute may begin
//! before the launch ahead of it in the stream has finished: its CTAs can set up barriers
//! and load inputs the previous launch does not write, then `wait` for that launch's
//! results. The previous launch's `launch_dependents` (once every one of its CTAs has
//! executed it or exited) is what lets the dependent launch be scheduled early; without
//! it, the dependent starts when the previous one completes, as usual.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `griddepcontrol.wait;` — blocks until every launch this one depends on has completed
/// and its memory operations are visible. A no-op for a launch made without the attribute.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wait() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands; orders this thread's later memory accesses after the wait.
    unsafe {
        asm!("griddepcontrol.wait;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::griddep::wait()
}

/// `griddepcontrol.launch_dependents;` — this CTA no longer holds back the next launch in
/// the stream (made with the attribute) from being scheduled.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn launch_dependents() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands, no memory effect.
    unsafe {
        asm!("griddepcontrol.launch_dependents;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emu::ops::griddep::launch_dependents()
}
