//! Warp- and warpgroup-level collectives (PTX ISA 9.7.13.x): `elect.sync`, `shfl.sync`,
//! `setmaxnreg`.

use super::{exec, warp_members};
use crate::cta::{Scope, WARP, WARPGROUP};
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
    // In: the lane's membermask; out: the elected lane.
    let (ex, elected) = ex.collective(
        Scope::Warp { warp, mask: membermask },
        members,
        membermask,
        |_, members, masks: &[u32], out: &mut [u32]| {
            if masks.iter().any(|&m| m != masks[0]) {
                return Err((
                    ErrorKind::Collective,
                    "elect.sync membermasks differ between the participating lanes".into(),
                ));
            }
            let elected = members.iter().min().copied().unwrap_or(0) % WARP;
            out.iter_mut().for_each(|o| *o = elected);
            Ok(())
        },
    );
    drop(ex);
    (elected, elected == lane)
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
    // In: (the lane's value, the lane it reads from); out: the value it receives.
    let input = (value, src_lane);
    let (ex, out) = ex.collective(Scope::Warp { warp, mask: u32::MAX }, members, input, |_, _, inputs, out| {
        for (o, &(_, src)) in out.iter_mut().zip(inputs) {
            // The source lane wraps within the warp (clamp 0x1f).
            *o = inputs[(src % WARP) as usize].0;
        }
        Ok(())
    });
    drop(ex);
    out
}

/// `setmaxnreg.{inc,dec}.sync.aligned.u32 regs;` — a warpgroup-collective change of its
/// threads' register budget. The model checks what the PTX ISA requires of the operand
/// (24..=256, a multiple of 8) and that the whole warpgroup executes it with the same
/// value and direction; registers are not otherwise modelled (the kernel proves at
/// compile time that its budgets fit the CTA's launch allocation).
#[track_caller]
pub fn setmaxnreg(increase: bool, regs: u32) {
    let ex = exec(if increase { "setmaxnreg.inc.sync.aligned.u32" } else { "setmaxnreg.dec.sync.aligned.u32" });
    if !(24..=256).contains(&regs) || !regs.is_multiple_of(8) {
        ex.fail(
            ErrorKind::Collective,
            format!("setmaxnreg with {regs} registers: the PTX ISA allows 24..=256 in multiples of 8"),
        );
    }
    let warpgroup = ex.me / WARPGROUP;
    let end = (warpgroup + 1) * WARPGROUP;
    let threads = ex.cta.threads();
    if end > threads {
        ex.fail(
            ErrorKind::Collective,
            format!("setmaxnreg in warpgroup {warpgroup}, which needs threads up to {end}; the CTA has {threads}"),
        );
    }
    let members = (warpgroup * WARPGROUP..end).collect();
    let (ex, ()) =
        ex.collective(Scope::Warpgroup(warpgroup), members, (increase, regs), |_, _, inputs, _: &mut [()]| {
            if inputs.iter().any(|&i| i != inputs[0]) {
                return Err((ErrorKind::Collective, "setmaxnreg operands differ within the warpgroup".into()));
            }
            Ok(())
        });
    drop(ex);
}
