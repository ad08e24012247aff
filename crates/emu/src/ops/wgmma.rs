//! Warpgroup matrix multiply-accumulate (PTX ISA 9.7.15): `wgmma.fence`,
//! `wgmma.mma_async` (SS and RS forms, f16 inputs, f32 accumulators),
//! `wgmma.commit_group`, `wgmma.wait_group`.
//!
//! The four warps of a warpgroup issue each instruction together. An `mma_async` is
//! recorded, not executed: its shared-memory operands are read and its accumulators
//! written when a `wait_group` guarantees completion. Until then the accumulator
//! registers hold a NaN poison (reading them early gives NaN results) and must not be
//! written (checked at completion); the shared memory it reads must not be overwritten
//! (checked at every store); and every shared byte it reads must have been fenced for
//! the async proxy by the thread that wrote it.

use super::exec;
use crate::cta::{Scope, WARPGROUP};
use crate::model::wgmma::{Inputs, a_frag_coord, acc_coord, decode_desc, mma_f32, valid_n};
use crate::race;
use crate::report::{ErrorKind, Loc};
use crate::units::wgmma::{MmaOp, OperandA, Shadow, WarpgroupMmas};

/// The bits an in-flight accumulator register holds: a quiet NaN with a recognisable
/// payload, so early reads poison the results and late writes are detected.
pub const ACC_POISON: u32 = 0x7FDE_AD00;

/// Rows of the A operand (and of the accumulator) per instruction.
const M: u32 = 64;
/// K per instruction for 16-bit inputs, in bytes per row (16 values x 2 bytes).
const K_BYTES: u32 = 32;
/// Bytes the tensor core reads as one unit (a swizzle chunk / core-matrix row).
const CHUNK: u32 = 16;

fn members(ex: &super::Exec) -> Result<(u32, Vec<u32>), (ErrorKind, String)> {
    let warpgroup = ex.me / WARPGROUP;
    let end = (warpgroup + 1) * WARPGROUP;
    if end > ex.cta.threads() {
        return Err((
            ErrorKind::Collective,
            format!("warpgroup {warpgroup} needs threads up to {end}, but the CTA has {}", ex.cta.threads()),
        ));
    }
    Ok((warpgroup, (warpgroup * WARPGROUP..end).collect()))
}

/// `wgmma.fence.sync.aligned;` — orders this warpgroup's earlier register accesses
/// before the following `mma_async`s; required before the first one and after any
/// access to their accumulator or A-fragment registers.
#[track_caller]
pub fn fence() {
    let ex = exec("wgmma.fence.sync.aligned");
    if ex.dropped() {
        return;
    }
    let r = members(&ex);
    let (ex, (wg, members)) = ex.check(r);
    let (ex, ()) = ex.collective(Scope::Warpgroup(wg), members, (), |ex, members, _, _: &mut [()]| {
        members.iter().for_each(|&m| ex.st.units.get_mut::<WarpgroupMmas>().fenced[m as usize] = true);
        Ok(())
    });
    drop(ex);
}

/// Operands of one `mma_async`, as one thread issues it.
#[derive(Clone, Copy, Debug)]
pub struct MmaArgs {
    /// The thread's accumulator registers (`n / 2` f32).
    pub accumulators: *mut f32,
    pub n: u32,
    /// The A descriptor (SS) or the address of the thread's four A registers (RS).
    pub a: u64,
    pub desc_b: u64,
    /// `scale-d`: false computes D = A*B, true D = A*B + D.
    pub accumulate: bool,
    pub negate_a: bool,
    pub negate_b: bool,
    /// A from registers (RS) instead of shared memory (SS).
    pub a_in_registers: bool,
    /// The type of both operands (`.f16` or `.bf16`).
    pub inputs: Inputs,
}

/// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{f16,bf16}.{f16,bf16}` (SS or RS).
///
/// # Safety
/// `args.accumulators` must point to `n / 2` f32 registers of the calling thread (and,
/// for RS, `args.a` to its four u32 A registers) that stay alive and untouched until a
/// `wait_group` completes the operation.
#[track_caller]
pub unsafe fn mma_async(args: MmaArgs) {
    let ex = exec(if args.a_in_registers { "wgmma.mma_async (RS)" } else { "wgmma.mma_async (SS)" });
    if !valid_n(args.n) {
        ex.fail(ErrorKind::Unsupported, format!("wgmma N = {} is not a multiple of 8 in 8..=256", args.n));
    }
    let r = members(&ex);
    let (ex, (wg, members)) = ex.check(r);
    let shape = (args.n, args.accumulate, args.negate_a, args.negate_b, args.a_in_registers, args.inputs);
    let operands = MmaOperands { a: args.a, desc_b: args.desc_b, accumulators: args.accumulators as usize, shape };
    let (ex, ()) = ex.collective(Scope::Warpgroup(wg), members, operands, |ex, members, inputs, _: &mut [()]| {
        issue(ex, wg, members, inputs, args)
    });
    drop(ex);
}

/// What one thread brings to the `mma_async` collective.
#[derive(Clone, Copy, Debug)]
struct MmaOperands {
    /// The A descriptor (SS) or the address of the thread's A registers (RS).
    a: u64,
    desc_b: u64,
    /// The address of the thread's accumulator registers.
    accumulators: usize,
    /// N, scale-d, negate-A, negate-B and the RS form: uniform in the warpgroup.
    shape: (u32, bool, bool, bool, bool, Inputs),
}

fn issue(
    ex: &mut super::Exec,
    wg: u32,
    members: &[u32],
    inputs: &[MmaOperands],
    args: MmaArgs,
) -> Result<(), (ErrorKind, String)> {
    let first = inputs[0];
    let uniform = |f: fn(&MmaOperands) -> u64, what: &str| -> Result<(), (ErrorKind, String)> {
        match inputs.iter().position(|s| f(s) != f(&first)) {
            Some(i) => Err((
                ErrorKind::Collective,
                format!(
                    "{what} differs between threads {} and {} of the warpgroup: it must be uniform",
                    members[0], members[i]
                ),
            )),
            None => Ok(()),
        }
    };
    uniform(|s| s.desc_b, "the B descriptor")?;
    if let Some(i) = inputs.iter().position(|s| s.shape != first.shape) {
        return Err((
            ErrorKind::Collective,
            format!(
                "the shape / scale-d / negate operands differs between threads {} and {} of the warpgroup: it must be uniform",
                members[0], members[i]
            ),
        ));
    }
    if !args.a_in_registers {
        uniform(|s| s.a, "the A descriptor")?;
    }
    if let Some(&m) = members.iter().find(|&&m| !ex.st.units.get::<WarpgroupMmas>().fenced[m as usize]) {
        return Err((
            ErrorKind::Wgmma,
            format!("thread {m} issues wgmma.mma_async without a wgmma.fence since its registers were last accessible"),
        ));
    }
    let chunks = |desc: u64, rows: u32, which: &str, ex: &super::Exec| -> Result<Vec<u32>, (ErrorKind, String)> {
        let d = decode_desc(desc).map_err(|m| (ErrorKind::Wgmma, format!("{which} descriptor {desc:#018x}: {m}")))?;
        let mut out = Vec::with_capacity((rows * 2) as usize);
        for row in 0..rows {
            for k_byte in (0..K_BYTES).step_by(CHUNK as usize) {
                let addr = d
                    .k_major_addr(row, k_byte)
                    .map_err(|m| (ErrorKind::Wgmma, format!("{which} descriptor {desc:#018x}: {m}")))?;
                ex.st.smem.index(addr, CHUNK, CHUNK).map_err(|(_, m)| {
                    (
                        ErrorKind::Wgmma,
                        format!("{which} descriptor {desc:#018x} leaves shared memory at row {row}: {m}"),
                    )
                })?;
                out.push(addr);
            }
        }
        Ok(out)
    };
    let b_chunks = chunks(args.desc_b, args.n, "B", ex)?;
    let a = if args.a_in_registers {
        // SAFETY: the caller of `mma_async` guarantees each pointer addresses 4 live u32s.
        OperandA::Registers(inputs.iter().map(|s| (s.a as usize, unsafe { *(s.a as *const [u32; 4]) })).collect())
    } else {
        OperandA::Smem(chunks(first.a, M, "A", ex)?)
    };
    let smem = &mut ex.st.smem;
    let a_chunks: &[u32] = match &a {
        OperandA::Smem(c) => c,
        OperandA::Registers(_) => &[],
    };
    // The tensor core may read its operands any time after issue: they must be ready now.
    for &addr in a_chunks.iter().chain(&b_chunks) {
        check_chunk(smem, addr, ex.loc)?;
    }
    for &addr in a_chunks.iter().chain(&b_chunks) {
        let i = (addr - smem.base) as usize;
        smem.async_readers[i..i + CHUNK as usize].iter_mut().for_each(|r| *r += 1);
    }
    // Every write to the operands must be ordered before the issue (on the warpgroup's
    // behalf: the collective joined its threads).
    let loc = ex.loc;
    for &addr in a_chunks.iter().chain(&b_chunks) {
        let i = (addr - ex.st.smem.base) as usize;
        race::wgmma_read(&mut ex.st, members, i, CHUNK as usize, loc, false).map_err(|m| (ErrorKind::DataRace, m))?;
    }
    let half = (args.n / 2) as usize;
    let accumulators: Vec<usize> = inputs.iter().map(|s| s.accumulators).collect();
    let state = &mut ex.st.units.get_mut::<WarpgroupMmas>().warpgroups[wg as usize];
    for (&m, &ptr) in members.iter().zip(&accumulators) {
        let shadow = state.shadows.entry((m, ptr)).or_insert_with(|| {
            // SAFETY: the caller guarantees `n / 2` live f32 registers at `ptr`.
            let regs = unsafe { std::slice::from_raw_parts_mut(ptr as *mut f32, half) };
            let values = regs.to_vec();
            regs.iter_mut().for_each(|r| *r = f32::from_bits(ACC_POISON));
            Shadow { values, in_flight: 0 }
        });
        shadow.in_flight += 1;
    }
    state.uncommitted.push(MmaOp {
        n: args.n,
        a,
        b_chunks,
        accumulate: args.accumulate,
        negate_a: args.negate_a,
        negate_b: args.negate_b,
        inputs: args.inputs,
        members: members.to_vec(),
        accumulators,
        loc: ex.loc,
    });
    Ok(())
}

/// `wgmma.commit_group.sync.aligned;` — closes the warpgroup's uncommitted operations
/// into a group.
#[track_caller]
pub fn commit_group() {
    let ex = exec("wgmma.commit_group.sync.aligned");
    if ex.dropped() {
        return;
    }
    let r = members(&ex);
    let (ex, (wg, members)) = ex.check(r);
    let (ex, ()) = ex.collective(Scope::Warpgroup(wg), members, (), |ex, _, _, _: &mut [()]| {
        let state = &mut ex.st.units.get_mut::<WarpgroupMmas>().warpgroups[wg as usize];
        let group = std::mem::take(&mut state.uncommitted);
        state.groups.push_back(group);
        Ok(())
    });
    drop(ex);
}

/// `wgmma.wait_group.sync.aligned n;` — completes all but the `n` newest groups.
#[track_caller]
pub fn wait_group(n: u32) {
    let ex = exec("wgmma.wait_group.sync.aligned");
    if ex.dropped() {
        return;
    }
    let r = members(&ex);
    let (ex, (wg, members)) = ex.check(r);
    // In: the thread's count.
    let (ex, ()) = ex.collective(Scope::Warpgroup(wg), members, n, |ex, members, counts, _: &mut [()]| {
        if counts.iter().any(|&c| c != n) {
            return Err((ErrorKind::Collective, "wgmma.wait_group counts differ within the warpgroup".into()));
        }
        while ex.st.units.get::<WarpgroupMmas>().warpgroups[wg as usize].groups.len() > n as usize {
            let group =
                ex.st.units.get_mut::<WarpgroupMmas>().warpgroups[wg as usize].groups.pop_front().unwrap_or_default();
            for op in group {
                complete(ex, wg, op)?;
            }
        }
        members.iter().for_each(|&m| ex.st.units.get_mut::<WarpgroupMmas>().fenced[m as usize] = false);
        Ok(())
    });
    drop(ex);
}

/// Checks that the tensor core may read one 16-byte operand chunk now: no asynchronous
/// copy still owns it, and every generic write to it was fenced for the async proxy by
/// its writer. `issued_at` is the wgmma's source line, for the report.
fn check_chunk(smem: &crate::memory::SharedMemory, addr: u32, issued_at: Loc) -> Result<(), (ErrorKind, String)> {
    smem.check_async_read(addr, CHUNK, || format!("the wgmma issued at {}:{}", issued_at.file(), issued_at.line()))
}

/// Reads 8 f16 values of one shared chunk, checking the async-proxy rules again (they
/// held at issue; nothing may have broken them since).
fn read_chunk(ex: &super::Exec, addr: u32, op: &MmaOp) -> Result<[u16; 8], (ErrorKind, String)> {
    let smem = &ex.st.smem;
    check_chunk(smem, addr, op.loc)?;
    let i = (addr - smem.base) as usize;
    let mut out = [0u16; 8];
    for (j, v) in out.iter_mut().enumerate() {
        *v = u16::from_le_bytes([smem.bytes[i + 2 * j], smem.bytes[i + 2 * j + 1]]);
    }
    Ok(out)
}

fn complete(ex: &mut super::Exec, wg: u32, op: MmaOp) -> Result<(), (ErrorKind, String)> {
    let n = op.n as usize;
    let k = (K_BYTES / 2) as usize;
    let mut a = vec![0u16; M as usize * k];
    match &op.a {
        OperandA::Smem(chunks) => {
            for (c, &addr) in chunks.iter().enumerate() {
                let (row, part) = (c / 2, c % 2);
                a[row * k + part * 8..row * k + part * 8 + 8].copy_from_slice(&read_chunk(ex, addr, &op)?);
            }
        }
        OperandA::Registers(regs) => {
            for (t, &(ptr, issued)) in regs.iter().enumerate() {
                // SAFETY: guaranteed live by the caller of `mma_async`.
                let now = unsafe { *(ptr as *const [u32; 4]) };
                if now != issued {
                    return Err((
                        ErrorKind::Wgmma,
                        format!(
                            "thread {} overwrote its A-fragment registers while the wgmma reading them was in flight",
                            op.members[t]
                        ),
                    ));
                }
                for (reg, word) in now.iter().enumerate() {
                    for half in 0..2 {
                        let (row, kk) = a_frag_coord(t as u32, reg as u32, half);
                        a[row as usize * k + kk as usize] = (word >> (16 * half)) as u16;
                    }
                }
            }
        }
    }
    let mut b = vec![0u16; n * k];
    for (c, &addr) in op.b_chunks.iter().enumerate() {
        let (row, part) = (c / 2, c % 2);
        b[row * k + part * 8..row * k + part * 8 + 8].copy_from_slice(&read_chunk(ex, addr, &op)?);
    }
    let state = &mut ex.st.units.get_mut::<WarpgroupMmas>().warpgroups[wg as usize];
    let mut d = vec![0f32; M as usize * n];
    for (t, (&m, &ptr)) in op.members.iter().zip(&op.accumulators).enumerate() {
        let shadow = &state.shadows[&(m, ptr)];
        for (v, &value) in shadow.values.iter().enumerate() {
            let (row, col) = acc_coord(t as u32, v as u32);
            d[row as usize * n + col as usize] = value;
        }
    }
    mma_f32(op.inputs, n, &a, &b, &mut d, op.accumulate, op.negate_a, op.negate_b)
        .map_err(|m| (ErrorKind::Wgmma, m))?;
    for (t, (&m, &ptr)) in op.members.iter().zip(&op.accumulators).enumerate() {
        let shadow = state.shadows.get_mut(&(m, ptr)).expect("shadow exists while in flight");
        for (v, value) in shadow.values.iter_mut().enumerate() {
            let (row, col) = acc_coord(t as u32, v as u32);
            *value = d[row as usize * n + col as usize];
        }
        shadow.in_flight -= 1;
        if shadow.in_flight == 0 {
            let shadow = state.shadows.remove(&(m, ptr)).expect("present");
            // SAFETY: guaranteed live by the caller of `mma_async`.
            let regs = unsafe { std::slice::from_raw_parts_mut(ptr as *mut f32, shadow.values.len()) };
            if let Some(v) = regs.iter().position(|r| r.to_bits() != ACC_POISON) {
                return Err((
                    ErrorKind::Wgmma,
                    format!(
                        "thread {m} wrote accumulator register {v} while a wgmma on it was in flight (missing wgmma.wait_group?)"
                    ),
                ));
            }
            regs.copy_from_slice(&shadow.values);
        }
    }
    let smem = &mut ex.st.smem;
    let a_chunks: &[u32] = match &op.a {
        OperandA::Smem(c) => c,
        OperandA::Registers(_) => &[],
    };
    for &addr in a_chunks.iter().chain(&op.b_chunks) {
        let i = (addr - smem.base) as usize;
        smem.async_readers[i..i + CHUNK as usize].iter_mut().for_each(|r| *r -= 1);
    }
    // The reads happened by this wait: a later write must be ordered after it.
    for &addr in a_chunks.iter().chain(&op.b_chunks) {
        let i = (addr - ex.st.smem.base) as usize;
        race::wgmma_read(&mut ex.st, &op.members, i, CHUNK as usize, op.loc, true)
            .map_err(|m| (ErrorKind::DataRace, m))?;
    }
    Ok(())
}
