//! Fault injection: dropping one synchronisation instruction of a kernel, to prove that
//! the emulator notices when it is missing.
//!
//! A [`Site`] is one call site of one instruction in the kernel source: the mnemonic the
//! emulator counts it under plus the source location the kernel's `#[track_caller]`
//! `ptx` wrappers capture. Every launch records, in [`Stats::sites`](crate::Stats), the
//! sites of the [droppable](DROPPABLE) instructions it executed. A launch with
//! [`Options::drop`](crate::Options) set to one of them runs the kernel with every
//! execution of that instruction at that site turned into a no-op, by every thread
//! (for a collective such as `bar.sync` or `wgmma.wait_group`, the whole group skips it
//! together, so no collective rule fires: only the missing synchronisation matters).
//!
//! What "dropped" means per class:
//! - a fence does nothing;
//! - a wait returns at once as if satisfied (`mbarrier.try_wait`/`test_wait` return
//!   true, `cp.async.wait_group`/`wait_all` and `wgmma.wait_group` complete nothing);
//! - an arrive (or commit that arrives) does not arrive: no arrival, no tx bytes;
//! - a commit does not close the group (the operations stay uncommitted);
//! - `bar.sync` neither arrives nor waits.
//!
//! # Making an instruction droppable
//!
//! Two lines, both required:
//! 1. add its mnemonic (exactly the string its op passes to `exec`) to [`DROPPABLE`];
//! 2. in the op, right after `let ex = exec("...")`, return without any effect when the
//!    site is the dropped one: `if ex.dropped() { return; }` (or return the value a
//!    satisfied wait returns, e.g. `true`).
//!
//! Both are checked: `dropped()` on an unlisted mnemonic fails a debug assertion, and a
//! listed op that never asks `dropped()` when its site is dropped gets an
//! [`UNHONOURED_DROP`] report at the thread's next instruction.
//!
//! For example, the tcgen05 models (`ops/tcgen05.rs`) opt in with
//! `if ex.dropped() { return; }` in `commit`, `wait_ld`, `fence_before_thread_sync` and
//! `fence_after_thread_sync`.
//!
//! Not droppable: data movement and computation (copies, `wgmma.mma_async`,
//! `tcgen05.mma`/`cp`/`ld`), setup (`mbarrier.init`, `tcgen05.alloc`), and atomics
//! (`atom.*`: dropping one loses data, not only ordering).

use crate::report::Loc;

/// One call site of one instruction in the kernel source.
///
/// Ordered by source location, then mnemonic, so a set of sites reads top to bottom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site {
    /// The kernel source location of the call (file, line, column).
    pub loc: Loc,
    /// The mnemonic, as in [`Stats::instructions`](crate::Stats).
    pub instruction: &'static str,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` at {}:{}:{}", self.instruction, self.loc.file(), self.loc.line(), self.loc.column())
    }
}

/// The instructions a fault-injection run may drop: every fence, wait, arrive and
/// commit the emulator models. Each entry is the exact mnemonic its op counts.
pub const DROPPABLE: &[&str] = &[
    // Fences.
    "fence.proxy.async.shared::cta",
    "fence.mbarrier_init.release.cluster",
    "fence.acq_rel.cta",
    "fence.acq_rel.gpu",
    "wgmma.fence.sync.aligned",
    "tcgen05.fence::before_thread_sync",
    "tcgen05.fence::after_thread_sync",
    // Waits.
    "mbarrier.try_wait.parity.shared::cta.b64",
    "mbarrier.test_wait.parity.shared::cta.b64",
    "cp.async.wait_group",
    "cp.async.wait_all",
    "wgmma.wait_group.sync.aligned",
    "tcgen05.wait::ld.sync.aligned",
    // Arrives (and the transaction count an arrival pairs with).
    "mbarrier.arrive.shared::cta.b64",
    "mbarrier.arrive.expect_tx.shared::cta.b64",
    "mbarrier.expect_tx.shared::cta.b64",
    "cp.async.mbarrier.arrive.shared::cta.b64",
    "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
    "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
    "bar.arrive",
    // Commits (the other half of a wait).
    "cp.async.commit_group",
    "wgmma.commit_group.sync.aligned",
    // Barriers (arrive and wait).
    "bar.sync",
];

/// The start of the report when an instruction in [`DROPPABLE`] was dropped but its op
/// ignored the drop (reported at the thread's next instruction, kind `Unsupported`): a
/// bug in the emulator, not in the kernel, so a fault campaign must not count it as a
/// detection.
pub const UNHONOURED_DROP: &str =
    "fault injection: this instruction is in emu::faults::DROPPABLE, but its op ignored the drop";

/// Whether `instruction` is in [`DROPPABLE`].
pub fn is_droppable(instruction: &str) -> bool {
    DROPPABLE.contains(&instruction)
}

/// Words that mark a mnemonic as synchronisation. A test can assert that every executed
/// instruction containing one of them is [`DROPPABLE`], so a new synchronisation
/// instruction cannot escape fault injection by being left off the list.
pub const SYNC_WORDS: &[&str] = &["fence", "wait", "arrive", "commit", "bar.", "barrier"];

/// Whether an executed mnemonic looks like synchronisation (see [`SYNC_WORDS`]).
/// `mbarrier.init` is setup, not synchronisation: dropping it is an uninitialised
/// barrier, reported on first use.
pub fn looks_like_sync(instruction: &str) -> bool {
    !instruction.starts_with("mbarrier.init") && SYNC_WORDS.iter().any(|w| instruction.contains(w))
}

#[cfg(test)]
mod tests {
    use super::UNHONOURED_DROP;
    use crate::{ErrorKind, GlobalMemory, LaunchConfig, Options, launch, launch_with};

    /// An op in the list that forgets to ask `dropped()` is reported, not silently run.
    #[test]
    fn an_op_that_ignores_its_drop_is_reported() {
        let gm = GlobalMemory::new();
        let config = LaunchConfig { grid: [1, 1, 1], block: [32, 1, 1], dynamic_smem: 0 };
        // A stand-in for a forgetful op: a listed mnemonic, executed without asking.
        let kernel = || {
            drop(crate::ops::exec("cp.async.wait_all"));
            crate::ops::barrier::sync_all(0);
        };
        let stats = launch(&gm, config, kernel).unwrap();
        let site = *stats.sites.keys().find(|s| s.instruction == "cp.async.wait_all").unwrap();
        let e = launch_with(&gm, config, &Options { drop: Some(site), ..Options::default() }, kernel).unwrap_err();
        assert_eq!((e.kind, e.instruction, e.location), (ErrorKind::Unsupported, "cp.async.wait_all", Some(site.loc)));
        assert!(e.message.starts_with(UNHONOURED_DROP), "{e}");
    }
}
