//! Warp- and warpgroup-level collectives (PTX ISA 9.7.13.x): `elect.sync`, `shfl.sync`,
//! `setmaxnreg`.

use super::{exec, warp_members};
use crate::cta::{Scope, WARP, WARPGROUP};
use crate::model::wgmma::Inputs;
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

/// The caller's warp and its 32 threads, for a collective of the whole warp (`what`);
/// fails in a partial warp.
fn full_warp(ex: super::Exec, what: &str) -> (super::Exec, u32, Vec<u32>) {
    let warp = ex.me / WARP;
    let members = warp_members(ex.cta, warp);
    if members.len() != WARP as usize {
        ex.fail(ErrorKind::Collective, format!("{what} in a partial warp of {} threads", members.len()));
    }
    (ex, warp, members)
}

/// `shfl.sync.idx.b32 d, a, src_lane, clamp, membermask;` for a full warp (membermask
/// all ones, clamp 0x1f): every lane receives lane `src_lane`'s `a`.
#[track_caller]
pub fn shfl_sync_idx(value: u32, src_lane: u32) -> u32 {
    let ex = exec("shfl.sync.idx.b32");
    let (ex, warp, members) = full_warp(ex, "shfl.sync with a full membermask");
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

/// `bar.warp.sync membermask;` for a full warp: every lane waits for the others. Like every
/// collective of this model it orders the lanes' earlier memory accesses before their later
/// ones (the PTX ISA: it "guarantees memory ordering among threads participating").
#[track_caller]
pub fn warp_sync() {
    let ex = exec("bar.warp.sync");
    let (ex, warp, members) = full_warp(ex, "bar.warp.sync with a full membermask");
    let (ex, ()) = ex.collective(Scope::Warp { warp, mask: u32::MAX }, members, (), |_, _, _, _| Ok(()));
    drop(ex);
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

/// Rows (M), columns (N) and depth (K) of `mma.sync.aligned.m16n8k16`.
pub const MMA_M: usize = 16;
pub const MMA_N: usize = 8;
pub const MMA_K: usize = 16;

/// Where lane `lane`'s fragment registers of `mma.sync.aligned.m16n8k16.row.col` with f16
/// inputs and f32 accumulators sit (PTX ISA 9.7.13.4.8, "Matrix Fragments for
/// mma.m16n8k16 with floating point type"); g = lane / 4, t = lane % 4:
/// * A (16 x 16, row-major), four registers of two f16 (the lower k in the low half):
///   a0 rows g, k 2t and 2t + 1; a1 row g + 8, the same k; a2 row g, k 2t + 8 and 2t + 9;
///   a3 row g + 8, those k. [`a_coord`] gives (row, k) of half `h` of register `r`.
/// * B (16 x 8, "col": stored per column n), two registers: b0 column g, k 2t and 2t + 1;
///   b1 column g, k 2t + 8 and 2t + 9 ([`b_coord`]: (n, k)).
/// * C and D (16 x 8 f32), four registers: c0, c1 row g, columns 2t and 2t + 1; c2, c3 row
///   g + 8, those columns ([`c_coord`]: (row, column)).
pub fn a_coord(lane: usize, r: usize, h: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (r % 2), 2 * t + h + 8 * (r / 2))
}
pub fn b_coord(lane: usize, r: usize, h: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (g, 2 * t + h + 8 * r)
}
pub fn c_coord(lane: usize, r: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (r / 2), 2 * t + r % 2)
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 d, a, b, c;`: D = A·B + C for one
/// warp, every lane passing its fragments (see [`a_coord`]) and receiving its part of D.
/// All 32 lanes must execute it. The arithmetic is `model::wgmma::mma_sync_m16n8k16_f32`'s
/// (each product exact, the 17-term sum rounded once to f32).
#[track_caller]
pub fn mma_m16n8k16_f32_f16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    mma_m16n8k16_f32(Inputs::F16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", a, b, c)
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c;`: as
/// [`mma_m16n8k16_f32_f16`] with bf16 inputs (the same fragment layout).
#[track_caller]
pub fn mma_m16n8k16_f32_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    mma_m16n8k16_f32(Inputs::Bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", a, b, c)
}

#[track_caller]
fn mma_m16n8k16_f32(types: Inputs, name: &'static str, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let ex = exec(name);
    let (ex, warp, members) = full_warp(ex, "mma.sync (all 32 lanes must execute it)");
    let input = (a, b, c);
    let (ex, out) = ex.collective(Scope::Warp { warp, mask: u32::MAX }, members, input, |_, _, inputs, out| {
        let half = |word: u32, h: usize| (word >> (16 * h)) as u16;
        let (mut fa, mut fb, mut d) = ([0u16; MMA_M * MMA_K], [0u16; MMA_N * MMA_K], [0f32; MMA_M * MMA_N]);
        for (lane, (a, b, c)) in inputs.iter().enumerate() {
            for r in 0..4 {
                for h in 0..2 {
                    let (row, k) = a_coord(lane, r, h);
                    fa[row * MMA_K + k] = half(a[r], h);
                }
                let (row, col) = c_coord(lane, r);
                d[row * MMA_N + col] = c[r];
            }
            for (r, &word) in b.iter().enumerate() {
                for h in 0..2 {
                    let (n, k) = b_coord(lane, r, h);
                    fb[n * MMA_K + k] = half(word, h);
                }
            }
        }
        crate::model::wgmma::mma_sync_m16n8k16_f32(types, &fa, &fb, &mut d).map_err(|e| (ErrorKind::Collective, e))?;
        for (lane, o) in out.iter_mut().enumerate() {
            *o = std::array::from_fn(|r| {
                let (row, col) = c_coord(lane, r);
                d[row * MMA_N + col]
            });
        }
        Ok(())
    });
    drop(ex);
    out
}
