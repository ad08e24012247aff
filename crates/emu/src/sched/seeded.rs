//! Seeded schedules: with `Options::seed`, a CTA's baton moves at random.
//!
//! Without a seed the scheduler is the plain round robin of `baton.rs`: a thread keeps the
//! baton until it blocks or exits, and the next runnable thread after it takes over;
//! every run is the same. With a seed, each CTA gets its own small deterministic PRNG
//! (splitmix64 of the seed and the CTA's linear index), which
//! - picks the thread that starts,
//! - at each instruction boundary (the start of every emulated instruction), hands the
//!   baton to a random runnable thread with a probability that also depends on the seed
//!   (from 1/2 to 1/64, so some seeds interleave finely and others coarsely),
//! - picks which runnable or newly woken thread takes the baton when one blocks.
//!
//! The schedule depends only on the seed and the CTA's own state, so a seed that finds a
//! bug finds it again.

use std::sync::MutexGuard;

use super::ThreadState;
use crate::cta::{Cta, CtaState};
use crate::race::Race;

/// One CTA's scheduling randomness (none without a seed).
pub(crate) struct Sched {
    state: Option<u64>,
    /// Preempt when the low bits of a draw under this mask are zero.
    preempt_mask: u64,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Sched {
    pub fn new(seed: Option<u64>, cta_index: u64) -> Sched {
        let Some(seed) = seed else { return Sched { state: None, preempt_mask: 0 } };
        let mut state = seed ^ cta_index.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let draw = splitmix64(&mut state);
        // 1 in 2, 4, ..., 64 instructions.
        let preempt_mask = (1u64 << (1 + draw % 6)) - 1;
        Sched { state: Some(state), preempt_mask }
    }

    fn draw(&mut self) -> Option<u64> {
        self.state.as_mut().map(splitmix64)
    }

    /// The thread that starts (thread 0 without a seed).
    pub fn first(&mut self, threads: u32) -> u32 {
        self.draw().map_or(0, |d| (d % threads as u64) as u32)
    }

    /// Where the search for the next thread to run starts: right after `me` without a
    /// seed (round robin), anywhere with one.
    pub fn start(&mut self, me: u32, threads: u32) -> u32 {
        match self.draw() {
            Some(d) => (d % threads as u64) as u32,
            None => (me + 1) % threads,
        }
    }

    fn preempt_now(&mut self) -> bool {
        let mask = self.preempt_mask;
        self.draw().is_some_and(|d| d & mask == 0)
    }
}

impl Cta<'_> {
    /// Before the CTA starts: turns race detection on or off and installs the schedule
    /// (which picks the first thread).
    pub(crate) fn instrument(&self, detect_races: bool, mut sched: Sched) {
        let mut st = self.lock();
        let threads = st.threads.len();
        st.race = detect_races.then(|| Box::new(Race::new(threads, st.smem.base, st.smem.bytes.len())));
        st.baton = sched.first(threads as u32);
        st.sched = sched;
    }

    /// At an instruction boundary of thread `me` (which holds the baton): with a seed,
    /// maybe hands the baton to another runnable thread and waits to get it back.
    pub(crate) fn maybe_preempt<'a>(&'a self, me: u32, mut st: MutexGuard<'a, CtaState>) -> MutexGuard<'a, CtaState> {
        if !st.sched.preempt_now() {
            return st;
        }
        let n = st.threads.len() as u32;
        let start = st.sched.start(me, n);
        let next = (0..n).map(|i| (start + i) % n).filter(|&t| t != me).find(|&t| match &st.threads[t as usize] {
            ThreadState::Runnable => true,
            ThreadState::Blocked { wait, .. } => super::satisfied(&st, wait),
            ThreadState::Exited => false,
        });
        let Some(next) = next else { return st };
        st.threads[next as usize] = ThreadState::Runnable;
        st.baton = next;
        self.wake[next as usize].notify_one();
        self.wait_for_baton(me, st)
    }
}
