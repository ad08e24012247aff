//! The cp.async unit (non-bulk asynchronous copies; instructions in `ops::cp_async`):
//! each thread's copies, grouped by `commit_group`, and the `cp.async.mbarrier.arrive`
//! arrivals that fire once the copies before them have landed. A copy lands at the wait
//! that guarantees it, or, when only an mbarrier observes it, when no thread can run
//! without it (see `units::complete_one_lazy`).

use std::collections::VecDeque;

use super::AsyncUnit;
use crate::cta::{Cta, CtaState};
use crate::memory::UnfencedWrite;
use crate::race::Kind;
use crate::report::{EmuError, ErrorKind, Loc};

#[derive(Clone, Debug)]
pub(crate) struct PendingCopy {
    pub sequence: u64,
    pub dst: u32,
    pub src: u64,
    pub size: u32,
    pub src_size: u32,
    pub loc: Loc,
}

/// An `mbarrier` arrival that fires once every copy up to `after` has completed.
#[derive(Clone, Debug)]
pub(crate) struct Trigger {
    pub after: u64,
    pub mbarrier: u32,
    pub loc: Loc,
}

/// One thread's copies in flight.
#[derive(Clone, Debug, Default)]
pub(crate) struct ThreadCopies {
    pub uncommitted: Vec<PendingCopy>,
    pub groups: VecDeque<Vec<PendingCopy>>,
    pub triggers: Vec<Trigger>,
    pub last_issued: u64,
}

impl ThreadCopies {
    pub fn oldest(&self) -> Option<&PendingCopy> {
        self.groups.iter().flatten().next().or(self.uncommitted.first())
    }
}

/// Every thread's copies in flight.
pub(crate) struct CpAsyncCopies {
    pub threads: Vec<ThreadCopies>,
}

impl CpAsyncCopies {
    /// The oldest copy some mbarrier arrival waits for: (its sequence, its thread).
    fn oldest_observed(&self) -> Option<(u64, u32)> {
        self.threads
            .iter()
            .enumerate()
            .filter_map(|(t, c)| {
                let first = c.triggers.first()?;
                let oldest = c.oldest()?;
                (oldest.sequence <= first.after).then_some((oldest.sequence, t as u32))
            })
            .min()
    }
}

impl AsyncUnit for CpAsyncCopies {
    fn new(threads: usize) -> CpAsyncCopies {
        CpAsyncCopies { threads: (0..threads).map(|_| ThreadCopies::default()).collect() }
    }

    fn oldest_pending(&self) -> Option<(u64, u32)> {
        self.oldest_observed()
    }

    fn complete_oldest(cta: &Cta<'_>, st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
        complete_oldest(cta, st, thread)
    }

    fn mbarrier_in_flight(&self, addr: u32) -> Option<String> {
        let arrivals: usize =
            self.threads.iter().map(|c| c.triggers.iter().filter(|t| t.mbarrier == addr).count()).sum();
        Some(format!("{arrivals} cp.async arrivals"))
    }
}

/// Completes thread `thread`'s oldest pending copy, then fires the arrivals it enables.
pub(crate) fn complete_oldest(cta: &Cta<'_>, st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
    let copies = &mut st.units.get_mut::<CpAsyncCopies>().threads[thread as usize];
    let copy = match copies.groups.iter_mut().find(|g| !g.is_empty()) {
        Some(g) => g.remove(0),
        None => copies.uncommitted.remove(0),
    };
    let i = (copy.dst - st.smem.base) as usize;
    let n = copy.size as usize;
    let fail = |m: String| EmuError::new(ErrorKind::OutOfBounds, "cp.async", m).at(thread, copy.loc);
    if copy.src_size > 0 {
        let ptr = cta.global.resolve(copy.src, copy.src_size as usize).map_err(fail)?;
        // SAFETY: `resolve` checked the source range.
        let src = unsafe { std::slice::from_raw_parts(ptr, copy.src_size as usize) };
        st.smem.bytes[i..i + src.len()].copy_from_slice(src);
    }
    st.smem.bytes[i + copy.src_size as usize..i + n].fill(0);
    st.smem.async_writers[i..i + n].iter_mut().for_each(|b| *b -= 1);
    st.smem.unfenced_by[i..i + n].iter_mut().for_each(|b| *b = thread + 1);
    st.smem.unfenced[thread as usize].push(UnfencedWrite { start: copy.dst, len: copy.size, loc: copy.loc });
    crate::race::async_write_complete(st, thread, i, n, Kind::CpAsync, "cp.async", copy.loc)?;
    fire_triggers(st, thread)
}

pub(crate) fn fire_triggers(st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
    loop {
        let copies = &st.units.get::<CpAsyncCopies>().threads[thread as usize];
        let Some(first) = copies.triggers.first() else { return Ok(()) };
        if copies.oldest().is_some_and(|c| c.sequence <= first.after) {
            return Ok(());
        }
        let trigger = st.units.get_mut::<CpAsyncCopies>().threads[thread as usize].triggers.remove(0);
        if !st.mbarriers.contains_key(&trigger.mbarrier) {
            return Err(EmuError::new(
                ErrorKind::Mbarrier,
                "cp.async.mbarrier.arrive",
                format!("mbarrier {:#x} vanished", trigger.mbarrier),
            ));
        }
        // The arrival is made on behalf of the issuing thread, releasing its accesses
        // (its copies' writes included).
        crate::race::mbarrier_signal(st, trigger.mbarrier, Some(thread), |m| m.arrive(1)).map_err(|msg| {
            EmuError::new(
                ErrorKind::Mbarrier,
                "cp.async.mbarrier.arrive",
                format!("mbarrier {:#x}: {msg}", trigger.mbarrier),
            )
            .at(thread, trigger.loc)
        })?;
    }
}
