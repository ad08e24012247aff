//! The baton: blocking, yielding after a futile poll, exiting, and handing the baton on.

use std::sync::MutexGuard;

use super::deadlock::deadlock_report;
use super::{Abort, FUTILE_POLL_LIMIT, ThreadState, Wait};
use crate::cta::{Cta, CtaState, Scope};
use crate::report::{EmuError, ErrorKind, Loc};

impl Cta<'_> {
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
            .iter()
            .find(|(_, r)| {
                r.count > 0
                    && r.members.contains(&me)
                    && !r.arrived[r.members.iter().position(|&m| m == me).unwrap_or(0)]
            })
            .map(|(scope, r)| (*scope, r.instruction, r.loc));
        if let Some((scope, instruction, loc)) = stranded {
            let error = EmuError::new(
                ErrorKind::Collective,
                instruction,
                format!(
                    "thread {me} exited while other threads of its {} wait for it at `{instruction}` ({}:{})",
                    match scope {
                        Scope::Warpgroup(_) => "warpgroup",
                        Scope::Warp { .. } => "warp",
                    },
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
