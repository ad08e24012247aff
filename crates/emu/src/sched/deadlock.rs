//! Deadlock reports: who waits on what.

use std::fmt::Write as _;

use super::{ThreadState, Wait};
use crate::cta::CtaState;

/// "Who waits on what", with runs of threads that wait on the same thing folded together.
pub(super) fn deadlock_report(st: &CtaState) -> String {
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
