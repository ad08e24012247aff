//! Warp-level collectives (PTX ISA 9.7.13.x): `elect.sync`.

use super::{exec, warp_members};
use crate::cta::{Scope, Slot, WARP};
use crate::report::ErrorKind;

/// `elect.sync laneid|is_elected, membermask;`: every thread in `membermask` must execute
/// it; one of them (the lowest lane, in this model as on current hardware) is elected.
/// Returns (elected lane, whether the caller is it).
#[track_caller]
pub fn elect_sync(membermask: u32) -> (u32, bool) {
    let ex = exec("elect.sync");
    let lane = ex.me % WARP;
    let warp = ex.me / WARP;
    if membermask & (1 << lane) == 0 {
        ex.fail(
            ErrorKind::Collective,
            format!("lane {lane} executes elect.sync with membermask {membermask:#010x}, which excludes it"),
        );
    }
    let members: Vec<u32> =
        warp_members(ex.cta, warp).into_iter().filter(|t| membermask & (1 << (t % WARP)) != 0).collect();
    let (ex, elected) = ex.collective(
        Scope::Warp { warp, mask: membermask },
        members,
        Slot { a: membermask as u64, ..Slot::default() },
        |_, members, inputs, out| {
            if inputs.iter().any(|s| s.a != inputs[0].a) {
                return Err((
                    ErrorKind::Collective,
                    "elect.sync membermasks differ between the participating lanes".into(),
                ));
            }
            let elected = members.iter().min().copied().unwrap_or(0) % WARP;
            out.iter_mut().for_each(|o| *o = elected as u64);
            Ok(())
        },
    );
    drop(ex);
    (elected as u32, elected as u32 == lane)
}

/// `shfl.sync.idx.b32 d, a, src_lane, clamp, membermask;` for a full warp (membermask
/// all ones, clamp 0x1f): every lane receives lane `src_lane`'s `a`.
#[track_caller]
pub fn shfl_sync_idx(value: u32, src_lane: u32) -> u32 {
    let ex = exec("shfl.sync.idx.b32");
    let warp = ex.me / WARP;
    let members = warp_members(ex.cta, warp);
    if members.len() != WARP as usize {
        ex.fail(
            ErrorKind::Collective,
            format!("shfl.sync with a full membermask in a partial warp of {} threads", members.len()),
        );
    }
    let slot = Slot { a: value as u64, b: src_lane as u64, ..Slot::default() };
    let (ex, out) = ex.collective(Scope::Warp { warp, mask: u32::MAX }, members, slot, |_, _, inputs, out| {
        for (o, input) in out.iter_mut().zip(inputs) {
            // The source lane wraps within the warp (clamp 0x1f).
            *o = inputs[(input.b % WARP as u64) as usize].a;
        }
        Ok(())
    });
    drop(ex);
    out as u32
}
