//! mbarrier objects in shared memory (PTX ISA 9.7.13.15).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

use super::SmemAddr;

/// An 8-byte mbarrier object in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Mbarrier(pub SmemAddr);

/// Bytes of one mbarrier object.
pub const MBARRIER_BYTES: u32 = 8;

impl Mbarrier {
    /// `mbarrier.init.shared::cta.b64 [bar], count;` — `count` arrivals complete a phase.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn init(self, count: u32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: `self` addresses an 8-byte aligned mbarrier slot in shared memory.
        unsafe {
            asm!("mbarrier.init.shared::cta.b64 [{}], {};", in(reg32) self.0.0, in(reg32) count, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        emu::ops::mbarrier::init(self.0.0, count)
    }

    /// `mbarrier.arrive.release.cta.shared::cta.b64 _, [bar];` — one arrival; releases
    /// this thread's earlier memory accesses to whoever waits for the phase.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn arrive(self) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as in `init`.
        unsafe {
            asm!("mbarrier.arrive.release.cta.shared::cta.b64 _, [{}];", in(reg32) self.0.0, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        emu::ops::mbarrier::arrive(self.0.0);
    }

    /// Waits until the phase with parity `parity` has completed:
    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;` in a loop (acquire
    /// semantics: the completing arrivals' writes are visible afterwards).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    // The label is local to the `{ }` block, a PTX scope, so inlined copies never clash.
    #[allow(named_asm_labels)]
    pub fn wait(self, parity: u32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as in `init`.
        unsafe {
            asm!(
                "{{",
                ".reg .pred done;",
                "retry:",
                "mbarrier.try_wait.parity.shared::cta.b64 done, [{bar}], {parity};",
                "@!done bra retry;",
                "}}",
                bar = in(reg32) self.0.0,
                parity = in(reg32) parity,
                options(nostack)
            )
        };
        #[cfg(not(target_arch = "nvptx64"))]
        while !emu::ops::mbarrier::try_wait_parity(self.0.0, parity) {}
    }
}

/// The transaction-count forms and the non-blocking test, for bulk and tensor copies.
impl Mbarrier {
    /// `mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [bar], bytes;` — adds
    /// `bytes` to the current phase's expected transaction count, then arrives once. The
    /// phase completes when its arrivals are done *and* that many bytes have been
    /// delivered (`complete_tx`) by the copies that signal `bar`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn arrive_expect_tx(self, bytes: u32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as in `init`.
        unsafe {
            asm!(
                "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [{}], {};",
                in(reg32) self.0.0, in(reg32) bytes, options(nostack)
            )
        };
        #[cfg(not(target_arch = "nvptx64"))]
        emu::ops::mbarrier::arrive_expect_tx(self.0.0, bytes);
    }

    /// `mbarrier.test_wait.parity.shared::cta.b64 p, [bar], parity;` — true when the phase
    /// with parity `parity` has completed, without waiting: the current (incomplete) phase
    /// gives false, the immediately preceding one true.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn test_wait(self, parity: u32) -> bool {
        #[cfg(target_arch = "nvptx64")]
        {
            let done: u32;
            // SAFETY: as in `init`.
            unsafe {
                asm!(
                    "{{",
                    ".reg .pred p;",
                    "mbarrier.test_wait.parity.shared::cta.b64 p, [{bar}], {parity};",
                    "selp.u32 {done}, 1, 0, p;",
                    "}}",
                    bar = in(reg32) self.0.0,
                    parity = in(reg32) parity,
                    done = out(reg32) done,
                    options(nostack)
                )
            };
            done != 0
        }
        #[cfg(not(target_arch = "nvptx64"))]
        emu::ops::mbarrier::test_wait_parity(self.0.0, parity)
    }
}
