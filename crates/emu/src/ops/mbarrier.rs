//! mbarrier objects (PTX ISA 9.7.13.15): 8-byte barriers in shared memory with a phase,
//! a pending-arrival count and a transaction (tx) count.
//!
//! A phase completes when its pending arrivals reach zero *and* its tx-count is zero;
//! then the phase number advances and the pending count resets to the init count.
//! `try_wait.parity p` succeeds once the phase with parity `p` has completed, i.e. while
//! the current phase's parity differs from `p`. Copies that signal `complete_tx` are
//! async-proxy operations, so the init must have been fenced (`fence.mbarrier_init` or
//! `fence.proxy.async`) before one of them arrives.

use super::{Exec, exec};
use crate::cta::Mbarrier;
use crate::report::ErrorKind;
use crate::sched::Wait;

pub use crate::cta::TX_LIMIT;

/// The mbarrier at `addr`, or a failure naming the problem.
pub(crate) fn lookup(ex: Exec, addr: u32) -> (Exec, ()) {
    let r = ex.st.smem.index(addr, 8, 8).map(|_| ());
    let (ex, ()) = ex.check(r);
    if !ex.st.mbarriers.contains_key(&addr) {
        ex.fail(ErrorKind::Mbarrier, format!("no mbarrier was initialised at shared address {addr:#x}"));
    }
    (ex, ())
}

/// `mbarrier.init.shared::cta.b64 [addr], count;`
#[track_caller]
pub fn init(addr: u32, count: u32) {
    let ex = exec("mbarrier.init.shared::cta.b64");
    let r = ex.st.smem.index(addr, 8, 8);
    let (mut ex, i) = ex.check(r);
    if count == 0 || count > TX_LIMIT as u32 {
        ex.fail(ErrorKind::Mbarrier, format!("mbarrier count {count} is outside 1..={TX_LIMIT}"));
    }
    let (me, loc) = (ex.me, ex.loc);
    ex.st.smem.mbarrier_bytes[i..i + 8].iter_mut().for_each(|b| *b = true);
    ex.st.mbarriers.insert(
        addr,
        Mbarrier { count, pending: count, tx: 0, phase: 0, initialised_by: me, init_fenced: false, init_loc: loc },
    );
    if let Some(race) = ex.st.race.as_deref_mut() {
        race.mbarrier_init(addr);
    }
}

/// Runs `f` on the mbarrier at `addr` for `instruction`, failing the launch on its error.
/// An arrival (`arrives`) signals other threads: it releases this thread's accesses, and
/// this thread's `tcgen05.ld`s must be ordered before it by
/// `tcgen05.fence::before_thread_sync`.
#[track_caller]
fn with_barrier(
    instruction: &'static str,
    addr: u32,
    arrives: bool,
    f: impl FnOnce(&mut Mbarrier) -> Result<u64, String>,
) -> u64 {
    let ex = exec(instruction);
    if ex.dropped() {
        // An arrive or expect_tx that never happened: the phase it returns is unused.
        return 0;
    }
    let (mut ex, ()) = lookup(ex, addr);
    if arrives {
        let r = crate::units::check_before_sync(&ex.st, ex.me);
        ex = ex.check(r).0;
    }
    let me = ex.me;
    match crate::race::mbarrier_signal(&mut ex.st, addr, arrives.then_some(me), f) {
        Ok(v) => v,
        Err(message) => ex.fail(ErrorKind::Mbarrier, format!("mbarrier {addr:#x}: {message}")),
    }
}

/// `mbarrier.arrive.shared::cta.b64 state, [addr];` — returns the phase arrived on.
#[track_caller]
pub fn arrive(addr: u32) -> u64 {
    with_barrier("mbarrier.arrive.shared::cta.b64", addr, true, |m| {
        let phase = m.phase;
        m.arrive(1).map(|()| phase)
    })
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 state, [addr], tx;`: adds `tx` expected
/// bytes to the current phase, then arrives.
#[track_caller]
pub fn arrive_expect_tx(addr: u32, tx: u32) -> u64 {
    with_barrier("mbarrier.arrive.expect_tx.shared::cta.b64", addr, true, |m| {
        let phase = m.phase;
        m.expect_tx(tx)?;
        m.arrive(1).map(|()| phase)
    })
}

/// `mbarrier.expect_tx.shared::cta.b64 [addr], tx;`
#[track_caller]
pub fn expect_tx(addr: u32, tx: u32) {
    with_barrier("mbarrier.expect_tx.shared::cta.b64", addr, false, |m| m.expect_tx(tx).map(|()| 0));
}

/// `mbarrier.try_wait.parity.shared::cta.b64 done, [addr], parity;` The hardware may
/// return false after a time limit and the kernel loops; the emulator instead blocks the
/// thread until the phase completes (other threads run meanwhile) and returns true, so a
/// wait that can never succeed is reported as a deadlock rather than spinning forever.
#[track_caller]
pub fn try_wait_parity(addr: u32, parity: u32) -> bool {
    let ex = exec("mbarrier.try_wait.parity.shared::cta.b64");
    if ex.dropped() {
        return true;
    }
    let (mut ex, ()) = lookup(ex, addr);
    if !ex.st.mbarriers[&addr].phase_completed(parity & 1) {
        // Acquires when the phase completes (see `race::mbarrier_signal`), and again below
        // (the same phase, unless an arrival bypassed `mbarrier_signal`).
        ex = ex.block(Wait::Mbarrier { addr, parity: parity & 1 });
    }
    acquire(&mut ex, addr);
    let (me, instruction, loc) = (ex.me, ex.instruction, ex.loc);
    crate::units::synchronised(&mut ex.st, me, instruction, loc);
    true
}

/// `mbarrier.test_wait.parity.shared::cta.b64 done, [addr], parity;` (non-blocking).
/// A false result lets the other threads run before the caller polls again, so a
/// polling loop makes progress (or is reported as a deadlock if it never can).
#[track_caller]
pub fn test_wait_parity(addr: u32, parity: u32) -> bool {
    let ex = exec("mbarrier.test_wait.parity.shared::cta.b64");
    if ex.dropped() {
        return true;
    }
    let (mut ex, ()) = lookup(ex, addr);
    if ex.st.mbarriers[&addr].phase_completed(parity & 1) {
        acquire(&mut ex, addr);
        let (me, instruction, loc) = (ex.me, ex.instruction, ex.loc);
        crate::units::synchronised(&mut ex.st, me, instruction, loc);
        return true;
    }
    let super::Exec { cta, me, st, instruction, loc } = ex;
    drop(cta.yield_baton(me, st, Wait::Mbarrier { addr, parity: parity & 1 }, instruction, loc));
    false
}

/// A wait that observed the last completed phase of the mbarrier at `addr` acquires what
/// was released into it.
fn acquire(ex: &mut Exec, addr: u32) {
    let me = ex.me;
    let phase = ex.st.mbarriers[&addr].phase;
    if let Some(race) = ex.st.race.as_deref_mut() {
        race.mbarrier_acquire(addr, phase, me);
    }
}

#[cfg(test)]
mod tests {
    use crate::cta::Mbarrier;

    #[test]
    fn describe_lists_what_each_unit_owes() {
        let m = Mbarrier {
            count: 2,
            pending: 1,
            tx: 64,
            phase: 3,
            initialised_by: 0,
            init_fenced: true,
            init_loc: std::panic::Location::caller(),
        };
        let owed =
            ["64 bytes of bulk copies".to_string(), "1 cp.async arrivals".into(), "0 tcgen05.commit arrivals".into()];
        assert_eq!(
            m.describe(&owed),
            "phase 3: 1 of 2 arrivals missing, tx-count 64 with 64 bytes of bulk copies, 1 cp.async arrivals and 0 \
             tcgen05.commit arrivals in flight"
        );
        assert_eq!(
            m.describe(&owed[..1]),
            "phase 3: 1 of 2 arrivals missing, tx-count 64 with 64 bytes of bulk copies in flight"
        );
    }
}
