//! Non-bulk asynchronous copies (PTX ISA 9.7.9.25.3): `cp.async`, `cp.async.commit_group`,
//! `cp.async.wait_group`, `cp.async.wait_all`, `cp.async.mbarrier.arrive`.
//!
//! A copy moves 4, 8 or 16 bytes from global to shared memory; when `src_size` is smaller
//! than the copy size the rest is zero-filled. The copies of a thread are grouped by
//! `commit_group`; `wait_group n` waits until at most the `n` newest groups are pending.
//! The data is written only when a wait guarantees it (or, for copies an mbarrier
//! observes, when nothing else can run): until then the destination bytes belong to the
//! copy, and reading them is reported. cp.async writes through the generic proxy, so an
//! async-proxy reader (wgmma) needs the issuing thread's `fence.proxy.async` first.

use std::collections::VecDeque;

use super::{Exec, exec};
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
    fn oldest(&self) -> Option<&PendingCopy> {
        self.groups.iter().flatten().next().or(self.uncommitted.first())
    }
}

/// `cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size};`
#[track_caller]
pub fn copy(dst: u32, src: u64, size: u32, src_size: u32) {
    let ex = exec(if size == 16 { "cp.async.cg.shared.global" } else { "cp.async.ca.shared.global" });
    if !matches!(size, 4 | 8 | 16) {
        ex.fail(ErrorKind::Unsupported, format!("cp.async copy size {size} is not 4, 8 or 16"));
    }
    if src_size > size {
        ex.fail(ErrorKind::OutOfBounds, format!("cp.async src-size {src_size} exceeds the copy size {size}"));
    }
    let r = ex.st.smem.index(dst, size, size);
    let (mut ex, i) = ex.check(r);
    if !src.is_multiple_of(size as u64) {
        ex.fail(ErrorKind::OutOfBounds, format!("cp.async global source {src:#x} is not {size}-byte aligned"));
    }
    if src_size > 0
        && let Err(m) = ex.cta.global.resolve(src, src_size as usize)
    {
        ex.fail(ErrorKind::OutOfBounds, m);
    }
    let r = ex.st.smem.claim_for_async_write(i, size as usize);
    let (ex, ()) = ex.check(r);
    let mut ex = ex.async_write_issue(i, size as usize, Kind::CpAsync);
    let sequence = ex.st.next_sequence();
    let (me, loc) = (ex.me as usize, ex.loc);
    let copies = &mut ex.st.copies[me];
    copies.uncommitted.push(PendingCopy { sequence, dst, src, size, src_size, loc });
    copies.last_issued = sequence;
}

/// `cp.async.commit_group;`
#[track_caller]
pub fn commit_group() {
    let mut ex = exec("cp.async.commit_group");
    let me = ex.me as usize;
    let copies = &mut ex.st.copies[me];
    let group = std::mem::take(&mut copies.uncommitted);
    copies.groups.push_back(group);
}

/// `cp.async.wait_group n;`
#[track_caller]
pub fn wait_group(n: u32) {
    let ex = exec("cp.async.wait_group");
    wait(ex, n as usize);
}

/// `cp.async.wait_all;` (= commit_group + wait_group 0).
#[track_caller]
pub fn wait_all() {
    let mut ex = exec("cp.async.wait_all");
    let me = ex.me as usize;
    let copies = &mut ex.st.copies[me];
    let group = std::mem::take(&mut copies.uncommitted);
    copies.groups.push_back(group);
    wait(ex, 0);
}

fn wait(mut ex: Exec, keep: usize) {
    let me = ex.me;
    while ex.st.copies[me as usize].groups.len() > keep {
        while ex.st.copies[me as usize].groups.front().is_some_and(|g| !g.is_empty()) {
            let (cta, st) = (ex.cta, &mut *ex.st);
            if let Err(e) = complete_oldest(cta, st, me) {
                cta.abort(ex.st, e);
            }
        }
        ex.st.copies[me as usize].groups.pop_front();
    }
}

/// `cp.async.mbarrier.arrive{.noinc}.shared::cta.b64 [mbar];`: an arrive-on operation
/// on `mbar` triggered when all prior cp.async of this thread complete. Without `.noinc`
/// the pending count is first incremented, so the arrival does not count toward the
/// init count; with `.noinc` it does.
#[track_caller]
pub fn mbarrier_arrive(mbar: u32, noinc: bool) {
    let ex = exec(if noinc {
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64"
    } else {
        "cp.async.mbarrier.arrive.shared::cta.b64"
    });
    let (mut ex, ()) = super::mbarrier::lookup(ex, mbar);
    let me = ex.me as usize;
    if !noinc {
        let m = ex.st.mbarriers.get_mut(&mbar).expect("looked up");
        m.pending += 1;
    }
    let loc = ex.loc;
    let copies = &mut ex.st.copies[me];
    let after = copies.last_issued;
    copies.triggers.push(Trigger { after, mbarrier: mbar, loc });
    let (cta, st) = (ex.cta, &mut *ex.st);
    if let Err(e) = fire_triggers(cta, st, me as u32) {
        cta.abort(ex.st, e);
    }
}

/// The oldest copy some mbarrier arrival waits for: (its sequence, its thread).
pub(crate) fn oldest_observed(st: &CtaState) -> Option<(u64, u32)> {
    st.copies
        .iter()
        .enumerate()
        .filter_map(|(t, c)| {
            let first = c.triggers.first()?;
            let oldest = c.oldest()?;
            (oldest.sequence <= first.after).then_some((oldest.sequence, t as u32))
        })
        .min()
}

/// Completes thread `thread`'s oldest pending copy, then fires the arrivals it enables.
pub(crate) fn complete_oldest(cta: &Cta<'_>, st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
    let copies = &mut st.copies[thread as usize];
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
    fire_triggers(cta, st, thread)
}

fn fire_triggers(_cta: &Cta<'_>, st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
    loop {
        let copies = &st.copies[thread as usize];
        let Some(first) = copies.triggers.first() else { return Ok(()) };
        if copies.oldest().is_some_and(|c| c.sequence <= first.after) {
            return Ok(());
        }
        let trigger = st.copies[thread as usize].triggers.remove(0);
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
