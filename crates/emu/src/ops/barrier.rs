//! Named barriers (PTX ISA 9.7.13.1 `bar`/`barrier`): `bar.sync a{, b}` and `bar.arrive a, b`.
//!
//! Barrier `a` (0..16) completes when `b` threads have arrived (all of the CTA's threads
//! when `b` is omitted). `bar.sync` waits for completion, `bar.arrive` does not. All
//! arrivals of one phase must agree on `b`. Completion also orders memory: everything
//! written before the arrivals is visible after the wait (the emulator's race
//! detector records the happens-before edge: see `race.rs`).

use super::exec;
use crate::cta::{NAMED_BARRIERS, WARP};
use crate::report::ErrorKind;
use crate::sched::Wait;

fn arrive(instruction: &'static str, id: u32, count: Option<u32>, wait: bool, loc_ex: super::Exec) -> super::Exec {
    let mut ex = loc_ex;
    let r = crate::units::check_before_sync(&ex.st, ex.me);
    ex = ex.check(r).0;
    let threads = ex.cta.threads();
    if id >= NAMED_BARRIERS {
        ex.fail(ErrorKind::Barrier, format!("barrier id {id} is out of range 0..{NAMED_BARRIERS}"));
    }
    let expected = count.unwrap_or(threads.next_multiple_of(WARP));
    if expected == 0 || !expected.is_multiple_of(WARP) {
        ex.fail(
            ErrorKind::Barrier,
            format!("thread count {expected} of barrier {id} is not a positive multiple of {WARP}"),
        );
    }
    if expected > threads.next_multiple_of(WARP) {
        ex.fail(ErrorKind::Barrier, format!("barrier {id} expects {expected} threads but the CTA has {threads}"));
    }
    let b = &mut ex.st.barriers[id as usize];
    if b.arrived > 0 && b.expected != expected {
        let message = format!(
            "`{instruction}` on barrier {id} with {expected} threads while {} threads already arrived expecting {}",
            b.arrived, b.expected
        );
        ex.fail(ErrorKind::Barrier, message);
    }
    b.expected = expected;
    // The hardware counts whole warps: a partial last warp counts 32 when it arrives
    // (here: when its last thread, the CTA's last, arrives).
    let padding = if ex.me + 1 == threads { threads.next_multiple_of(WARP) - threads } else { 0 };
    b.arrived += 1 + padding;
    let generation = b.generation;
    let complete = b.arrived >= b.expected;
    if complete {
        b.arrived = 0;
        b.generation += 1;
    }
    // Arrivals release; completion lets the `bar.sync` threads of the generation acquire.
    let (me, st) = (ex.me, &mut *ex.st);
    if let Some(race) = st.race.as_deref_mut() {
        race.bar_arrive(id, me);
        if complete {
            race.bar_complete(id, generation, &st.threads, wait.then_some(me));
        }
    }
    if !complete && wait {
        ex = ex.block(Wait::Bar { id, generation });
    }
    if wait {
        let (me, loc) = (ex.me, ex.loc);
        crate::units::synchronised(&mut ex.st, me, instruction, loc);
    }
    ex
}

/// `bar.sync id;` — all threads of the CTA.
#[track_caller]
pub fn sync_all(id: u32) {
    let ex = exec("bar.sync");
    if ex.dropped() {
        return;
    }
    drop(arrive("bar.sync", id, None, true, ex));
}

/// `bar.sync id, count;`
#[track_caller]
pub fn sync(id: u32, count: u32) {
    let ex = exec("bar.sync");
    if ex.dropped() {
        return;
    }
    drop(arrive("bar.sync", id, Some(count), true, ex));
}

/// `bar.arrive id, count;`
#[track_caller]
pub fn arrive_only(id: u32, count: u32) {
    let ex = exec("bar.arrive");
    if ex.dropped() {
        return;
    }
    drop(arrive("bar.arrive", id, Some(count), false, ex));
}
