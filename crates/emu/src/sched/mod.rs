//! The scheduler layer: which of a CTA's threads runs, what the others wait for, and
//! when the CTA is deadlocked. It knows the synchronisation objects threads block on
//! (named barriers, mbarriers, collectives) and reaches the asynchronous units only
//! through the generic functions of `crate::units`; it knows no instruction.
//!
//! Each CTA thread is a host thread, but only one of them runs at a time: the one that
//! holds the *baton* (`baton.rs`). A thread keeps the baton until it blocks (a barrier, an
//! mbarrier wait, a collective the rest of its warp has not reached) or exits; then the
//! scheduler hands the baton to the next runnable thread in round-robin order (or, under
//! `Schedule::HighestFirst`, to the highest-numbered one). Running one thread at a time
//! makes every run reproducible, lets the emulator's state live behind one uncontended
//! lock, and turns "every live thread is blocked" into a simple test: then one piece of
//! lazy asynchronous work is completed (`units::complete_one_lazy`), and if there is none
//! the CTA is deadlocked (`deadlock.rs` says who waits on what). With a seed
//! (`seeded.rs`) the baton also moves at random instruction boundaries, and the race
//! detector (`race.rs`) checks what the schedule did not happen to order.

mod baton;
mod deadlock;
mod seeded;

pub(crate) use baton::satisfied;
pub(crate) use seeded::Sched;

use crate::cta::Scope;
use crate::report::Loc;
use crate::units::UnitId;

/// The payload a thread unwinds with when its CTA is aborted (not a panic of its own).
pub(crate) struct Abort;

/// What a blocked thread waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// `bar.sync id` until the barrier's generation moves past `generation`.
    Bar { id: u32, generation: u64 },
    /// `mbarrier.try_wait.parity` until the phase with this parity has completed.
    Mbarrier { addr: u32, parity: u32 },
    /// A collective until its rendezvous completes `generation`.
    Collective { scope: Scope, generation: u64 },
    /// A resource of an asynchronous unit (e.g. `tcgen05.alloc` until enough
    /// tensor-memory columns are free): the unit says when `arg` is satisfied.
    Unit { unit: UnitId, arg: u32 },
}

/// Where a thread stands with the scheduler.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ThreadState {
    Runnable,
    Blocked { wait: Wait, instruction: &'static str, loc: Loc },
    Exited,
}

/// False polls per live thread, with nothing else executed in between, after which a
/// polling loop is reported as a deadlock.
pub const FUTILE_POLL_LIMIT: u64 = 1_000;
