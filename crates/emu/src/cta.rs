//! One CTA under emulation: its threads, its scheduler and all its on-chip state.
//!
//! Each CTA thread is a host thread, but only one of them runs at a time: the one that
//! holds the *baton*. A thread keeps the baton until it blocks (a barrier, an mbarrier
//! wait, a collective the rest of its warp has not reached) or exits; then the scheduler
//! hands the baton to the next runnable thread in round-robin order (or, under
//! `Schedule::HighestFirst`, to the highest-numbered one). Running one thread at a time
//! makes every run reproducible, lets the emulator's state live behind one uncontended
//! lock, and turns "every live thread is blocked" into a simple test. With a seed
//! (`sched.rs`) the baton also moves at random instruction boundaries, and the race
//! detector (`race.rs`) checks what the schedule did not happen to order.
//!
//! Asynchronous units (copies, tensor-core operations) are completed as late as the PTX
//! rules allow: at the wait that guarantees them, or, for copies that only an mbarrier
//! observes, when no thread can run without them.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::memory::{GlobalMemory, SharedMemory};
use crate::ops::mbarrier::Mbarrier;
use crate::report::{EmuError, ErrorKind, Loc};
use crate::units::{UnitId, Units};

/// Threads per warp.
pub const WARP: u32 = 32;
/// Threads per warpgroup (four consecutive warps).
pub const WARPGROUP: u32 = 128;

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

#[derive(Clone, Copy, Debug)]
pub(crate) enum ThreadState {
    Runnable,
    Blocked { wait: Wait, instruction: &'static str, loc: Loc },
    Exited,
}

/// The threads a collective instruction joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Scope {
    /// The lanes `mask` of warp `warp` (its index in the CTA).
    Warp { warp: u32, mask: u32 },
    /// A warpgroup (its index in the CTA).
    Warpgroup(u32),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Scope::Warp { warp, mask: u32::MAX } => write!(f, "warp {warp}"),
            Scope::Warp { warp, mask } => write!(f, "lanes {mask:#010x} of warp {warp}"),
            Scope::Warpgroup(wg) => write!(f, "warpgroup {wg}"),
        }
    }
}

/// A collective instruction being assembled from its threads' arrivals.
pub(crate) struct Rendezvous {
    pub instruction: &'static str,
    pub loc: Loc,
    /// Linear thread indices that must arrive.
    pub members: Vec<u32>,
    pub arrived: Vec<bool>,
    pub count: usize,
    /// What each member brought, typed by the instruction: a `Vec<Option<In>>` of the
    /// collective's input type (the scheduler only stores it).
    pub inputs: Box<dyn std::any::Any + Send>,
    /// The last completed round's results, a `Vec<Out>` of its output type.
    pub outputs: Box<dyn std::any::Any + Send>,
    pub generation: u64,
}

/// A named barrier (`bar.sync` / `bar.arrive`, ids 0..16).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NamedBarrier {
    pub expected: u32,
    pub arrived: u32,
    pub generation: u64,
}

/// False polls per live thread, with nothing else executed in between, after which a
/// polling loop is reported as a deadlock.
pub const FUTILE_POLL_LIMIT: u64 = 1_000;

/// Named barriers per CTA.
pub const NAMED_BARRIERS: u32 = 16;

/// Everything on chip that belongs to one CTA, behind the CTA lock.
pub(crate) struct CtaState {
    pub baton: u32,
    pub threads: Vec<ThreadState>,
    pub aborted: Option<EmuError>,
    pub smem: SharedMemory,
    pub barriers: [NamedBarrier; NAMED_BARRIERS as usize],
    pub mbarriers: BTreeMap<u32, Mbarrier>,
    pub rendezvous: HashMap<Scope, Rendezvous>,
    /// The state of every asynchronous unit (see `crate::units`).
    pub units: Units,
    /// Monotonic counter that orders asynchronous work for lazy completion.
    pub async_sequence: u64,
    /// False polls since any thread last executed another instruction.
    pub futile_polls: u64,
    /// Happens-before tracking of shared memory (`None` when race detection is off).
    pub race: Option<Box<crate::race::Race>>,
    /// The seeded schedule's randomness.
    pub sched: crate::sched::Sched,
}

/// A CTA: its identity, its state and one wake-up signal per thread.
pub(crate) struct Cta<'g> {
    pub global: &'g GlobalMemory,
    pub ctaid: [u32; 3],
    pub nctaid: [u32; 3],
    pub ntid: [u32; 3],
    pub state: Mutex<CtaState>,
    pub wake: Vec<Condvar>,
    /// The instruction site this launch drops (fault injection, see `crate::faults`).
    pub drop: Option<crate::faults::Site>,
    /// The order in which threads take the baton.
    pub schedule: crate::launch::Schedule,
}

impl<'g> Cta<'g> {
    pub fn new(
        global: &'g GlobalMemory,
        ctaid: [u32; 3],
        nctaid: [u32; 3],
        ntid: [u32; 3],
        smem_base: u32,
        smem_len: u32,
    ) -> Cta<'g> {
        let threads = (ntid[0] * ntid[1] * ntid[2]) as usize;
        Cta {
            global,
            ctaid,
            nctaid,
            ntid,
            state: Mutex::new(CtaState {
                baton: 0,
                threads: vec![ThreadState::Runnable; threads],
                aborted: None,
                smem: SharedMemory::new(smem_base, smem_len, threads),
                barriers: [NamedBarrier::default(); NAMED_BARRIERS as usize],
                mbarriers: BTreeMap::new(),
                rendezvous: HashMap::new(),
                units: Units::new(threads),
                async_sequence: 0,
                futile_polls: 0,
                race: None,
                sched: crate::sched::Sched::new(None, 0),
            }),
            wake: (0..threads).map(|_| Condvar::new()).collect(),
            drop: None,
            schedule: crate::launch::Schedule::RoundRobin,
        }
    }

    pub fn threads(&self) -> u32 {
        self.ntid[0] * self.ntid[1] * self.ntid[2]
    }

    pub fn lock(&self) -> MutexGuard<'_, CtaState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until thread `me` holds the baton (or the CTA is aborted: then unwinds).
    pub fn wait_for_baton<'a>(&'a self, me: u32, mut st: MutexGuard<'a, CtaState>) -> MutexGuard<'a, CtaState> {
        while st.baton != me && st.aborted.is_none() {
            st = self.wake[me as usize].wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.aborted.is_some() {
            drop(st);
            std::panic::resume_unwind(Box::new(Abort));
        }
        st
    }

    /// Records `error` (with this CTA's index), wakes every thread and unwinds.
    pub fn abort(&self, mut st: MutexGuard<'_, CtaState>, mut error: EmuError) -> ! {
        error.cta = self.ctaid;
        if st.aborted.is_none() {
            st.aborted = Some(error);
        }
        for c in &self.wake {
            c.notify_one();
        }
        drop(st);
        std::panic::resume_unwind(Box::new(Abort));
    }

    /// Blocks thread `me` until `wait` is satisfied, running other threads meanwhile.
    pub fn block<'a>(
        &'a self,
        me: u32,
        mut st: MutexGuard<'a, CtaState>,
        wait: Wait,
        instruction: &'static str,
        loc: Loc,
    ) -> MutexGuard<'a, CtaState> {
        st.threads[me as usize] = ThreadState::Blocked { wait, instruction, loc };
        st = self.pass_baton(me, st);
        self.wait_for_baton(me, st)
    }

    /// Thread `me` polled something that is not ready (`test_wait`). Polls change
    /// nothing, so the CTA counts false polls since any thread last executed anything
    /// else. Once every live thread has polled in vain, one piece of lazy asynchronous
    /// work is completed (it may be what they wait for); if there is none and the polls
    /// go on to `FUTILE_POLL_LIMIT`, the polling loop can never end and is reported as a
    /// deadlock. Otherwise the baton goes to the next runnable thread (a single probe
    /// that returns false and moves on is legal).
    pub fn yield_baton<'a>(
        &'a self,
        me: u32,
        mut st: MutexGuard<'a, CtaState>,
        polling: Wait,
        instruction: &'static str,
        loc: Loc,
    ) -> MutexGuard<'a, CtaState> {
        st.futile_polls += 1;
        let live = st.threads.iter().filter(|t| !matches!(t, ThreadState::Exited)).count() as u64;
        if st.futile_polls >= live {
            match crate::units::complete_one_lazy(self, &mut st) {
                Ok(true) => {
                    st.futile_polls = 0;
                    return st;
                }
                Ok(false) => {}
                Err(error) => self.abort(st, error),
            }
        }
        if st.futile_polls >= FUTILE_POLL_LIMIT * live {
            st.threads[me as usize] = ThreadState::Blocked { wait: polling, instruction, loc };
            let report = deadlock_report(&st);
            self.abort(st, EmuError::new(ErrorKind::Deadlock, "(scheduler)", report));
        }
        if let Some(next) = next_runnable(&mut st, me, self.schedule, true).filter(|&t| t != me) {
            st.threads[next as usize] = ThreadState::Runnable;
            st.baton = next;
            self.wake[next as usize].notify_one();
            return self.wait_for_baton(me, st);
        }
        st
    }

    /// Thread `me` has finished the kernel.
    pub fn exit<'a>(&'a self, me: u32, mut st: MutexGuard<'a, CtaState>) -> MutexGuard<'a, CtaState> {
        st.threads[me as usize] = ThreadState::Exited;
        // A collective that waits for this thread can never complete.
        let stranded = st
            .rendezvous
            .values()
            .find(|r| {
                r.count > 0
                    && r.members.contains(&me)
                    && !r.arrived[r.members.iter().position(|&m| m == me).unwrap_or(0)]
            })
            .map(|r| (r.instruction, r.loc));
        if let Some((instruction, loc)) = stranded {
            let error = EmuError::new(
                ErrorKind::Collective,
                instruction,
                format!(
                    "thread {me} exited while other threads of its {} wait for it at `{instruction}` ({}:{})",
                    if instruction.starts_with("wgmma") { "warpgroup" } else { "warp" },
                    loc.file(),
                    loc.line()
                ),
            )
            .at(me, loc);
            self.abort(st, error);
        }
        self.pass_baton(me, st)
    }

    /// Hands the baton to the next runnable thread after `me`, completing lazy
    /// asynchronous work if nothing can run, and reporting a deadlock if still nothing can.
    fn pass_baton<'a>(&'a self, me: u32, mut st: MutexGuard<'a, CtaState>) -> MutexGuard<'a, CtaState> {
        loop {
            if let Some(next) = next_runnable(&mut st, me, self.schedule, false) {
                st.threads[next as usize] = ThreadState::Runnable;
                st.baton = next;
                if next != me {
                    self.wake[next as usize].notify_one();
                }
                return st;
            }
            if st.threads.iter().all(|t| matches!(t, ThreadState::Exited)) {
                return st;
            }
            match crate::units::complete_one_lazy(self, &mut st) {
                Ok(true) => continue,
                Ok(false) => {
                    let report = deadlock_report(&st);
                    let error = EmuError::new(ErrorKind::Deadlock, "(scheduler)", report);
                    self.abort(st, error);
                }
                Err(error) => self.abort(st, error),
            }
        }
    }
}

/// Whether a blocked thread's wait is satisfied now.
pub(crate) fn satisfied(st: &CtaState, wait: &Wait) -> bool {
    match *wait {
        Wait::Bar { id, generation } => st.barriers[id as usize].generation != generation,
        Wait::Mbarrier { addr, parity } => st.mbarriers.get(&addr).is_some_and(|m| m.phase_completed(parity)),
        Wait::Collective { scope, generation } => st.rendezvous.get(&scope).is_none_or(|r| r.generation != generation),
        Wait::Unit { unit, arg } => crate::units::wait_satisfied(st, unit, arg),
    }
}

/// The next thread to run after `me`: the first runnable one from where the schedule
/// starts looking (right after `me`, round robin, without a seed), `me` itself last.
/// Under [`Schedule::HighestFirst`](crate::launch::Schedule) the highest-numbered runnable
/// thread instead, except when `me` yields after a futile poll (`polling`): then the
/// search goes down from `me`, round robin, so pollers cannot starve other threads.
fn next_runnable(st: &mut CtaState, me: u32, schedule: crate::launch::Schedule, polling: bool) -> Option<u32> {
    let n = st.threads.len() as u32;
    let start = st.sched.start(me, n);
    let order: Vec<u32> = match schedule {
        crate::launch::Schedule::RoundRobin => {
            (0..n).map(|i| (start + i) % n).filter(|&t| t != me).chain(std::iter::once(me)).collect()
        }
        crate::launch::Schedule::HighestFirst if polling => (1..=n).map(|i| (me + n - i) % n).collect(),
        crate::launch::Schedule::HighestFirst => (0..n).rev().collect(),
    };
    order.into_iter().find(|&t| match &st.threads[t as usize] {
        ThreadState::Runnable => true,
        ThreadState::Blocked { wait, .. } => satisfied(st, wait),
        ThreadState::Exited => false,
    })
}

/// "Who waits on what", with runs of threads that wait on the same thing folded together.
fn deadlock_report(st: &CtaState) -> String {
    let mut lines: Vec<(String, Vec<u32>)> = Vec::new();
    for (t, state) in st.threads.iter().enumerate() {
        let ThreadState::Blocked { wait, instruction, loc } = state else { continue };
        let what = match *wait {
            Wait::Bar { id, .. } => {
                let b = &st.barriers[id as usize];
                format!("`{instruction}` barrier {id} ({} of {} threads arrived)", b.arrived, b.expected)
            }
            Wait::Mbarrier { addr, parity } => match st.mbarriers.get(&addr) {
                Some(m) => format!(
                    "`{instruction}` on mbarrier {addr:#x} for parity {parity} ({})",
                    m.describe(&crate::units::mbarrier_in_flight(st, addr))
                ),
                None => format!("`{instruction}` on {addr:#x}, where no mbarrier was initialised"),
            },
            Wait::Collective { scope, .. } => {
                let r = &st.rendezvous[&scope];
                let missing: Vec<u32> =
                    r.members.iter().zip(&r.arrived).filter(|(_, a)| !**a).map(|(m, _)| *m).collect();
                format!("`{instruction}` for threads {} of its {scope} that never arrive", ranges(&missing))
            }
            Wait::Unit { unit, arg } => {
                format!("`{instruction}` {}", crate::units::describe_wait(st, unit, arg))
            }
        };
        let line = format!("{what} at {}:{}", loc.file(), loc.line());
        match lines.iter_mut().find(|(l, _)| *l == line) {
            Some((_, ts)) => ts.push(t as u32),
            None => lines.push((line, vec![t as u32])),
        }
    }
    let mut out = String::from("every live thread is blocked:");
    for (line, ts) in &lines {
        let _ = write!(out, "\n  threads {} wait at {line}", ranges(ts));
    }
    for note in crate::units::deadlock_notes(st) {
        let _ = write!(out, "\n  {note}");
    }
    let exited = st.threads.iter().filter(|t| matches!(t, ThreadState::Exited)).count();
    if exited > 0 {
        let _ = write!(out, "\n  ({exited} threads have exited)");
    }
    out
}

/// `[0,1,2,3,7]` → `"0-3, 7"`.
pub(crate) fn ranges(ids: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        while i + 1 < ids.len() && ids[i + 1] == ids[i] + 1 {
            i += 1;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        if ids[i] == start {
            let _ = write!(out, "{start}");
        } else {
            let _ = write!(out, "{start}-{}", ids[i]);
        }
        i += 1;
    }
    out
}

impl CtaState {
    pub fn next_sequence(&mut self) -> u64 {
        self.async_sequence += 1;
        self.async_sequence
    }
}

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn ranges_fold_consecutive_ids() {
        assert_eq!(ranges(&[0, 1, 2, 3, 7, 9, 10]), "0-3, 7, 9-10");
        assert_eq!(ranges(&[5]), "5");
        assert_eq!(ranges(&[]), "");
    }
}
