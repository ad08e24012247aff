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

use super::{Exec, exec};
use crate::race::Kind;
use crate::report::ErrorKind;
use crate::units::cp_async::{CpAsyncCopies, PendingCopy, Trigger, complete_oldest, fire_triggers};

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
    let copies = &mut ex.st.units.get_mut::<CpAsyncCopies>().threads[me];
    copies.uncommitted.push(PendingCopy { sequence, dst, src, size, src_size, loc });
    copies.last_issued = sequence;
}

/// `cp.async.commit_group;`
#[track_caller]
pub fn commit_group() {
    let mut ex = exec("cp.async.commit_group");
    if ex.dropped() {
        return;
    }
    let me = ex.me as usize;
    let copies = &mut ex.st.units.get_mut::<CpAsyncCopies>().threads[me];
    let group = std::mem::take(&mut copies.uncommitted);
    copies.groups.push_back(group);
}

/// `cp.async.wait_group n;`
#[track_caller]
pub fn wait_group(n: u32) {
    let ex = exec("cp.async.wait_group");
    if ex.dropped() {
        return;
    }
    wait(ex, n as usize);
}

/// `cp.async.wait_all;` (= commit_group + wait_group 0).
#[track_caller]
pub fn wait_all() {
    let mut ex = exec("cp.async.wait_all");
    if ex.dropped() {
        return;
    }
    let me = ex.me as usize;
    let copies = &mut ex.st.units.get_mut::<CpAsyncCopies>().threads[me];
    let group = std::mem::take(&mut copies.uncommitted);
    copies.groups.push_back(group);
    wait(ex, 0);
}

fn wait(mut ex: Exec, keep: usize) {
    let me = ex.me;
    while ex.st.units.get::<CpAsyncCopies>().threads[me as usize].groups.len() > keep {
        while ex.st.units.get::<CpAsyncCopies>().threads[me as usize].groups.front().is_some_and(|g| !g.is_empty()) {
            let (cta, st) = (ex.cta, &mut *ex.st);
            if let Err(e) = complete_oldest(cta, st, me) {
                cta.abort(ex.st, e);
            }
        }
        ex.st.units.get_mut::<CpAsyncCopies>().threads[me as usize].groups.pop_front();
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
    if ex.dropped() {
        return;
    }
    let (mut ex, ()) = super::mbarrier::lookup(ex, mbar);
    let me = ex.me as usize;
    if !noinc {
        let m = ex.st.mbarriers.get_mut(&mbar).expect("looked up");
        m.pending += 1;
    }
    let loc = ex.loc;
    let copies = &mut ex.st.units.get_mut::<CpAsyncCopies>().threads[me];
    let after = copies.last_issued;
    copies.triggers.push(Trigger { after, mbarrier: mbar, loc });
    if let Err(e) = fire_triggers(&mut ex.st, me as u32) {
        ex.cta.abort(ex.st, e);
    }
}
