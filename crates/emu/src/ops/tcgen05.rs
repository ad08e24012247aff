//! Blackwell fifth-generation tensor-core instructions (PTX ISA 9.7.16, `sm_100a`):
//! tensor memory allocation, `tcgen05.cp`, `tcgen05.mma.kind::mxf4nvf4.block_scale`,
//! `tcgen05.commit`, `tcgen05.ld`, `tcgen05.wait::ld` and the tcgen05 fences.
//!
//! API contract with the kernel crate's `ptx::tcgen05` wrappers (every function is
//! `#[track_caller]`). Tensor-memory addresses are 32-bit: lane in bits 31-16, column in
//! bits 15-0. Shared-memory addresses are shared-window addresses (as `cvta.to.shared`).
//!
//! How the unit is emulated (all of its state is one `units::tcgen05::Tcgen05Unit` in the CTA):
//! * **Tensor memory** (TMEM) is 128 lanes × 512 columns of 32-bit cells, created on the
//!   first `alloc` and filled with [`TMEM_POISON`] (a NaN: real TMEM starts as garbage).
//!   Every access must fall inside an allocation.
//! * **`cp` and `mma` are asynchronous.** They are checked and recorded at issue, per
//!   issuing thread and in issue order (so a thread's `cp` → `mma` order holds), and
//!   executed — shared memory read, TMEM written — only when a `commit`'s mbarrier arrival
//!   is needed: when no thread can run without it (the lazy completion of
//!   `units::complete_one_lazy`), i.e. as late as the rules allow. While pending, the
//!   shared bytes they read are claimed (a store into them is `InFlightRead`) and the TMEM
//!   columns they read and write are owned (a `ld` of them, or another thread's `cp`/`mma`
//!   touching them, is reported).
//! * **Ordering.** Executing a thread's ops in issue order is stronger than the hardware:
//!   PTX ISA 9.7.16.6 orders only the pipelines `cp` → `mma` and `mma` → `mma` with the same
//!   accumulator (address, shape, kind). So a pending op that an unordered later op of the
//!   same thread could race with is reported at the later op's issue: `mma` → `cp` or
//!   `cp` → `cp` on the same columns, and `mma` → `mma` through different but overlapping
//!   accumulators or through columns one reads as scale factors and the other writes.
//! * **Scale factors** are read at execution from all four lane quarters, which must hold
//!   equal, written words (a cell nothing wrote since its allocation is reported).
//! * **`ld` is asynchronous too:** the registers hold [`LD_POISON`] until the warp's
//!   `wait_ld`, so a missing wait yields NaN (and a register written before the wait is
//!   reported). A `cp`/`mma` may not overwrite columns another thread has read with a `ld`
//!   that it has not yet released with `fence::before_thread_sync`.
//! * **Fences.** After a thread synchronisation (a completed mbarrier wait or `bar.sync`) a
//!   thread must execute `fence::after_thread_sync` before its next `mma`/`cp`/`ld`/
//!   `dealloc`; after a `ld` it must execute `fence::before_thread_sync` (or a `commit`,
//!   which implies it) before its next arrive or `bar.sync`. These are the canonical
//!   patterns of PTX ISA 9.7.16.6.4, enforced strictly (per thread, whatever the
//!   synchronisation orders).

use std::ops::Range;

use super::{Exec, exec, warp_members};
use crate::cta::{Scope, WARP};
use crate::model::tcgen05::{DescError, MMA_M, TMEM_COLUMNS, TMEM_LANES, decode_idesc, decode_smem_desc};
use crate::report::ErrorKind;
use crate::sched::Wait;
use crate::units::tcgen05::{
    Allocation, Commit, Op, OpKind, PendingLd, Tcgen05Unit, Tmem, fire_commits, overlap, sfb_columns,
};

pub use crate::units::tcgen05::TMEM_POISON;
/// What a `tcgen05.ld` destination register holds until the warp's `wait_ld`.
pub const LD_POISON: u32 = 0x7FDE_AD02;

const MMA: &str = "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X";
const CP: &str = "tcgen05.cp.cta_group::1.32x128b.warpx4";

fn column_of(taddr: u32) -> u32 {
    taddr & 0xFFFF
}

fn lane_of(taddr: u32) -> u32 {
    taddr >> 16
}

/// The whole warp of the calling thread, which `.sync.aligned` instructions need.
fn full_warp(ex: Exec) -> (Exec, u32, Vec<u32>) {
    let warp = ex.me / WARP;
    let members = warp_members(ex.cta, warp);
    if members.len() != WARP as usize {
        let n = members.len();
        ex.fail(ErrorKind::Collective, format!("a .sync.aligned tcgen05 instruction in a partial warp of {n} threads"));
    }
    (ex, warp, members)
}

/// Fails unless `f` of every member's input equals the first member's.
fn uniform<In>(members: &[u32], inputs: &[In], f: fn(&In) -> u32, what: &str) -> Result<(), (ErrorKind, String)> {
    match inputs.iter().position(|s| f(s) != f(&inputs[0])) {
        Some(i) => Err((
            ErrorKind::Collective,
            format!("{what} differs between threads {} and {} of the warp: it must be uniform", members[0], members[i]),
        )),
        None => Ok(()),
    }
}

/// Fails if another thread read columns `cols` with a `tcgen05.ld` that no
/// `fence::before_thread_sync` of that thread has ordered yet: nothing can order that read
/// before this write (the pattern is ld, `fence::before_thread_sync`, then a signal the
/// writer waits for).
fn require_reads_released(ex: Exec, cols: &Range<u32>) -> Exec {
    let me = ex.me;
    let unreleased = ex.st.units.get::<Tcgen05Unit>().threads.iter().enumerate().find_map(|(t, q)| {
        let (at, ranges) = q.ld_unfenced.as_ref()?;
        (t as u32 != me && ranges.iter().any(|r| overlap(r, cols))).then_some((t, *at))
    });
    if let Some((t, at)) = unreleased {
        let message = format!(
            "writes tensor-memory columns {}..{} that thread {t} read with the tcgen05.ld at {}:{} and has not \
             released with tcgen05.fence::before_thread_sync (then a synchronisation this thread waits for): the \
             write may overtake the read",
            cols.start,
            cols.end,
            at.file(),
            at.line()
        );
        ex.fail(ErrorKind::Tcgen05, message);
    }
    ex
}

/// Fails unless the calling thread executed `fence::after_thread_sync` since its last
/// synchronisation.
fn require_fence_after(ex: Exec) -> Exec {
    if let Some((instruction, at)) = ex.st.units.get::<Tcgen05Unit>().threads[ex.me as usize].synced {
        let message = format!(
            "this thread completed `{instruction}` at {}:{} and then issues `{}` with no \
             tcgen05.fence::after_thread_sync in between: the tcgen05 operation is not ordered after the work the \
             synchronisation waited for",
            at.file(),
            at.line(),
            ex.instruction
        );
        ex.fail(ErrorKind::Tcgen05, message);
    }
    ex
}

fn desc_error(which: &str, desc: u64, e: DescError) -> (ErrorKind, String) {
    match e {
        DescError::Invalid(m) => (ErrorKind::Tcgen05, format!("{which} descriptor {desc:#018x}: {m}")),
        DescError::Unsupported(m) => (ErrorKind::Unsupported, format!("{which} descriptor {desc:#018x}: {m}")),
    }
}

// ---------------------------------------------------------------------------------------
// Allocation
// ---------------------------------------------------------------------------------------

/// `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], columns;` — warp
/// collective: allocates `columns` (a power of two in 32..=512) tensor-memory columns of
/// all 128 lanes and writes the base address (lane 0, first column) to shared memory at
/// `dst`. First fit, aligned to the size. Blocks while there is no room (reported as a
/// deadlock if none ever comes); an error after `relinquish_alloc_permit`.
#[track_caller]
pub fn alloc(dst: u32, columns: u32) {
    let ex = exec("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32");
    let (ex, warp, members) = full_warp(ex);
    let r = ex.st.smem.index(dst, 4, 4).map(|_| ());
    let (mut ex, ()) = ex.check(r);
    // In: (destination, column count); out: whether the columns were allocated.
    let input = (dst, columns);
    loop {
        let scope = Scope::Warp { warp, mask: u32::MAX };
        let (ex2, done) = ex.collective(scope, members.clone(), input, |ex, members, inputs, out: &mut [bool]| {
            uniform(members, inputs, |s| s.0, "the destination address")?;
            uniform(members, inputs, |s| s.1, "the column count")?;
            if !columns.is_power_of_two() || !(32..=TMEM_COLUMNS).contains(&columns) {
                return Err((
                    ErrorKind::Tcgen05,
                    format!("tcgen05.alloc of {columns} columns: the count must be a power of two in 32..=512"),
                ));
            }
            let loc = ex.loc;
            let unit = &mut ex.st.units.get_mut::<Tcgen05Unit>();
            if let Some(at) = unit.relinquished {
                return Err((
                    ErrorKind::Tcgen05,
                    format!(
                        "tcgen05.alloc after this CTA's tcgen05.relinquish_alloc_permit at {}:{}",
                        at.file(),
                        at.line()
                    ),
                ));
            }
            let Some(column) = unit.first_fit(columns) else {
                out.iter_mut().for_each(|o| *o = false);
                return Ok(());
            };
            unit.tmem.get_or_insert_with(|| Box::new(Tmem::new()));
            unit.allocations.insert(column, Allocation { columns, loc });
            store_address(&mut ex.st.smem, dst, column)?;
            // A write on behalf of the whole warp (see `race::collective_write`).
            let (i, me) = ((dst - ex.st.smem.base) as usize, ex.me);
            crate::race::collective_write(&mut ex.st, me, i, 4, loc).map_err(|m| (ErrorKind::DataRace, m))?;
            out.iter_mut().for_each(|o| *o = true);
            Ok(())
        });
        if done {
            return;
        }
        ex = ex2.block(Wait::Unit { unit: crate::units::id::<Tcgen05Unit>(), arg: columns });
    }
}

/// The shared-memory store of `alloc` (checked like a generic store).
fn store_address(smem: &mut crate::memory::SharedMemory, dst: u32, value: u32) -> Result<(), (ErrorKind, String)> {
    let i = smem.index(dst, 4, 4)?;
    if (i..i + 4).any(|b| smem.async_writers[b] > 0) {
        return Err((
            ErrorKind::AsyncOwned,
            format!("tcgen05.alloc writes shared {dst:#x} while an asynchronous copy into it is pending"),
        ));
    }
    if (i..i + 4).any(|b| smem.async_readers[b] > 0) {
        return Err((
            ErrorKind::InFlightRead,
            format!("tcgen05.alloc writes shared {dst:#x}, which an in-flight async-proxy reader still reads"),
        ));
    }
    if smem.mbarrier_bytes[i..i + 4].iter().any(|&m| m) {
        return Err((ErrorKind::Mbarrier, format!("tcgen05.alloc writes shared {dst:#x} over an mbarrier object")));
    }
    smem.bytes[i..i + 4].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

/// `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, columns;` — warp collective:
/// frees an allocation (address and size must match one exactly). Its columns must not be
/// used by a pending `cp`/`mma`. The freed cells are poisoned again.
#[track_caller]
pub fn dealloc(taddr: u32, columns: u32) {
    let ex = exec("tcgen05.dealloc.cta_group::1.sync.aligned.b32");
    let (ex, warp, members) = full_warp(ex);
    let ex = require_fence_after(ex);
    // In: (tensor-memory address, column count).
    let input = (taddr, columns);
    let scope = Scope::Warp { warp, mask: u32::MAX };
    let (ex, ()) = ex.collective(scope, members, input, |ex, members, inputs, _: &mut [()]| {
        uniform(members, inputs, |s| s.0, "the tensor-memory address")?;
        uniform(members, inputs, |s| s.1, "the column count")?;
        let unit = &mut ex.st.units.get_mut::<Tcgen05Unit>();
        let column = column_of(taddr);
        let matches = lane_of(taddr) == 0 && unit.allocations.get(&column).is_some_and(|a| a.columns == columns);
        if !matches {
            return Err((
                ErrorKind::Tcgen05,
                format!(
                    "tcgen05.dealloc of {columns} columns at {taddr:#010x} matches no allocation (allocated: {})",
                    unit.allocations_summary()
                ),
            ));
        }
        let cols = column..column + columns;
        if let Some((t, op)) =
            unit.find_pending(|o| overlap(&o.writes(), &cols) || o.reads().iter().any(|r| overlap(r, &cols)))
        {
            return Err((
                ErrorKind::Tcgen05,
                format!(
                    "tcgen05.dealloc of columns {}..{} while the {} by thread {t} still uses them (wait for its \
                     tcgen05.commit's mbarrier first)",
                    cols.start,
                    cols.end,
                    op.at()
                ),
            ));
        }
        unit.allocations.remove(&column);
        if let Some(tmem) = unit.tmem.as_mut() {
            for lane in 0..TMEM_LANES {
                let i = Tmem::at(lane, column);
                tmem.cells[i..i + columns as usize].fill(TMEM_POISON);
                tmem.written[i..i + columns as usize].fill(false);
            }
        }
        Ok(())
    });
    drop(ex);
}

/// `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;` — warp collective: the CTA
/// will allocate no more; a later `alloc` is an error.
#[track_caller]
pub fn relinquish_alloc_permit() {
    let ex = exec("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned");
    let (ex, warp, members) = full_warp(ex);
    let (ex, ()) = ex.collective(Scope::Warp { warp, mask: u32::MAX }, members, (), |ex, _, _, _: &mut [()]| {
        let loc = ex.loc;
        ex.st.units.get_mut::<Tcgen05Unit>().relinquished.get_or_insert(loc);
        Ok(())
    });
    drop(ex);
}

// ---------------------------------------------------------------------------------------
// cp and mma (single-thread issue, asynchronous)
// ---------------------------------------------------------------------------------------

/// Checks the 16-byte chunks an op will read (in bounds, no pending copy, fenced for the
/// async proxy) and claims them as in-flight reads.
fn claim_chunks(ex: Exec, chunks: &[u32], which: &str, desc: u64) -> Exec {
    let (issued_at, instruction) = (ex.loc, ex.instruction);
    let error = {
        let smem = &ex.st.smem;
        chunks.iter().enumerate().find_map(|(i, &addr)| {
            if let Err((_, m)) = smem.index(addr, 16, 16) {
                let message = format!("{which} descriptor {desc:#018x} leaves shared memory (chunk {i}): {m}");
                return Some((ErrorKind::OutOfBounds, message));
            }
            let reader = || format!("the {instruction} issued at {}:{}", issued_at.file(), issued_at.line());
            smem.check_async_read(addr, 16, reader).err()
        })
    };
    if let Some((kind, message)) = error {
        ex.fail(kind, message);
    }
    let saturated = {
        let smem = &ex.st.smem;
        chunks.iter().find(|&&addr| {
            let i = (addr - smem.base) as usize;
            smem.async_readers[i..i + 16].contains(&u8::MAX)
        })
    };
    if let Some(addr) = saturated {
        let message = format!(
            "shared chunk {addr:#x} already has {} pending async-proxy readers, the most the emulator tracks",
            u8::MAX
        );
        ex.fail(ErrorKind::Unsupported, message);
    }
    let mut ex = ex;
    // Every write of the operand must happen before the issue (data-race detection).
    let (me, loc) = (ex.me, ex.loc);
    for &addr in chunks {
        let i = (addr - ex.st.smem.base) as usize;
        let r = crate::race::async_read(&mut ex.st, me, i, 16, loc, false).map_err(|m| (ErrorKind::DataRace, m));
        ex = ex.check(r).0;
    }
    let smem = &mut ex.st.smem;
    for &addr in chunks {
        let i = (addr - smem.base) as usize;
        smem.async_readers[i..i + 16].iter_mut().for_each(|r| *r += 1);
    }
    ex
}

fn enqueue(mut ex: Exec, kind: OpKind) {
    let sequence = ex.st.next_sequence();
    let (me, loc) = (ex.me as usize, ex.loc);
    let q = &mut ex.st.units.get_mut::<Tcgen05Unit>().threads[me];
    q.ops.push_back(Op { sequence, kind, loc });
    q.last_issued = sequence;
}

/// `tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], src_desc;` — issued by one thread:
/// copies 32 rows × 16 bytes from shared memory (no-swizzle K-major layout, row r at
/// `start + (r/8)·SBO + (r%8)·16`) into tensor memory; row r's bytes 4j..4j+3 land in
/// column `taddr.col + j` of lanes r, 32+r, 64+r and 96+r (`.warpx4` replicates into every
/// lane quarter). Asynchronous (see the module doc).
#[track_caller]
pub fn cp_32x128b_warpx4(taddr: u32, src_desc: u64) {
    let ex = exec(CP);
    let ex = require_fence_after(ex);
    if lane_of(taddr) != 0 {
        ex.fail(
            ErrorKind::Tcgen05,
            format!("tcgen05.cp destination {taddr:#010x}: the lane field must be 0 for .32x128b.warpx4"),
        );
    }
    let column = column_of(taddr);
    let cols = column..column + 4;
    let r = ex.st.units.get::<Tcgen05Unit>().check_allocated(cols.clone(), "tcgen05.cp destination");
    let (ex, ()) = ex.check(r);
    let desc = decode_smem_desc(src_desc).map_err(|m| (ErrorKind::Tcgen05, format!("source: {m}")));
    let (ex, desc) = ex.check(desc);
    let rows: Result<Vec<u32>, _> = (0..32).map(|r| desc.cp_row(r)).collect();
    let (ex, rows) = ex.check(rows.map_err(|e| desc_error("source", src_desc, e)));
    if let Some(message) = ex.st.units.get::<Tcgen05Unit>().cp_conflict(ex.me, &cols) {
        ex.fail(ErrorKind::Tcgen05, message);
    }
    let ex = require_reads_released(ex, &cols);
    let ex = claim_chunks(ex, &rows, "source", src_desc);
    enqueue(ex, OpKind::Cp { rows, column });
}

/// `tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [d], a_desc, b_desc,
/// idesc, [sfa], [sfb], enable_input_d;` — issued by one thread:
/// D[128 × N] (+)= (A·SFA)[128 × 64] · (B·SFB)[N × 64]ᵀ in f32 (see
/// [`crate::model::tcgen05::mma_block_scale_4x`] for the arithmetic).
///
/// * `d`: D[m][n] is lane m, column `d.col + n`; lane field 0.
/// * A and B: packed e2m1, K-major, 128-byte swizzle (`model::tcgen05::SmemDesc`).
/// * `sfa`: row r's four scales are the bytes of the cell at lane r%32, column
///   `sfa.col + r/32`, replicated in lanes 32+r%32, 64+r%32, 96+r%32 — all four replicas
///   must be equal (the hardware may read any of them). `sfb` likewise for the N rows of B
///   (`ceil(N/32)` columns). Lane field and SF-id bits 30-31 must be 0.
///
/// Asynchronous (see the module doc).
#[track_caller]
pub fn mma_mxf4nvf4_block_scale_4x(
    d: u32,
    a_desc: u64,
    b_desc: u64,
    idesc: u32,
    sfa: u32,
    sfb: u32,
    enable_input_d: bool,
) {
    let ex = exec(MMA);
    let ex = require_fence_after(ex);
    let r = decode_idesc(idesc).map_err(|m| (ErrorKind::Tcgen05, m));
    let (ex, id) = ex.check(r);
    if lane_of(d) != 0 {
        ex.fail(
            ErrorKind::Tcgen05,
            format!("accumulator address {d:#010x}: the lane field must be 0 (M = 128 uses all 128 lanes)"),
        );
    }
    for (name, t) in [("scale-A", sfa), ("scale-B", sfb)] {
        if t >> 30 != 0 {
            ex.fail(
                ErrorKind::Tcgen05,
                format!("{name} address {t:#010x}: the SF id bits 30-31 must be 0 with .scale_vec::4X"),
            );
        }
        if lane_of(t) != 0 {
            ex.fail(ErrorKind::Tcgen05, format!("{name} address {t:#010x}: the lane field must be 0"));
        }
    }
    let (dc, ac, bc) = (column_of(d), column_of(sfa), column_of(sfb));
    let d_cols = dc..dc + id.n;
    let checks = [
        (d_cols.clone(), "the accumulator"),
        (ac..ac + 4, "the scale factors of A"),
        (bc..bc + sfb_columns(id.n), "the scale factors of B"),
    ];
    let mut ex = ex;
    for (cols, what) in &checks {
        let r = ex.st.units.get::<Tcgen05Unit>().check_allocated(cols.clone(), what);
        ex = ex.check(r).0;
    }
    let chunks = |desc: u64, rows: u32, which: &str| -> Result<Vec<u32>, (ErrorKind, String)> {
        let dd = decode_smem_desc(desc).map_err(|m| (ErrorKind::Tcgen05, format!("{which}: {m}")))?;
        let mut out = Vec::with_capacity(2 * rows as usize);
        for row in 0..rows {
            for c in 0..2 {
                out.push(dd.mma_operand_chunk(row, c).map_err(|e| desc_error(which, desc, e))?);
            }
        }
        Ok(out)
    };
    let r = chunks(a_desc, MMA_M as u32, "A");
    let (ex, a_chunks) = ex.check(r);
    let r = chunks(b_desc, id.n, "B");
    let (ex, b_chunks) = ex.check(r);
    let scale_cols = [checks[1].0.clone(), checks[2].0.clone()];
    if let Some(message) = ex.st.units.get::<Tcgen05Unit>().mma_conflict(ex.me, dc, id.n, &scale_cols) {
        ex.fail(ErrorKind::Tcgen05, message);
    }
    let ex = require_reads_released(ex, &d_cols);
    let ex = claim_chunks(ex, &a_chunks, "A", a_desc);
    let ex = claim_chunks(ex, &b_chunks, "B", b_desc);
    enqueue(ex, OpKind::Mma { d: dc, idesc: id, a_chunks, b_chunks, sfa: ac, sfb: bc, accumulate: enable_input_d });
}

/// `tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [mbar];` — one
/// arrival on `mbar` once every earlier `cp`/`mma` of this thread has completed (at once if
/// there is none). Implies `fence::before_thread_sync`.
#[track_caller]
pub fn commit(mbar: u32) {
    let ex = exec("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64");
    if ex.dropped() {
        return;
    }
    let (mut ex, ()) = super::mbarrier::lookup(ex, mbar);
    let (me, loc) = (ex.me, ex.loc);
    let q = &mut ex.st.units.get_mut::<Tcgen05Unit>().threads[me as usize];
    q.ld_unfenced = None;
    let after = q.last_issued;
    q.commits.push_back(Commit { after, mbarrier: mbar, loc });
    if let Err(e) = fire_commits(&mut ex.st, me) {
        ex.cta.abort(ex.st, e);
    }
}

// ---------------------------------------------------------------------------------------
// ld and the fences
// ---------------------------------------------------------------------------------------

/// `tcgen05.ld.sync.aligned.32x32b.x{n}.b32 {r0..}, [taddr];` — warp collective with a
/// uniform `taddr`: thread t of the warp receives lane `taddr.lane + t`, register i column
/// `taddr.col + i`. Warp w may access only lanes 32·(w%4)..32·(w%4)+31, so `taddr.lane`
/// must be 32·(w%4). The values are taken at issue (no pending `cp`/`mma` may still write
/// them) but reach the registers only at this thread's `wait_ld`; until then they hold
/// [`LD_POISON`].
///
/// # Safety
/// `regs` must point to `n` u32 registers of the calling thread that stay alive and
/// untouched until this thread's next `wait_ld`.
#[track_caller]
pub unsafe fn ld_32x32b(taddr: u32, regs: *mut u32, n: u32) {
    let ex = exec("tcgen05.ld.sync.aligned.32x32b.b32");
    let (ex, warp, members) = full_warp(ex);
    let ex = require_fence_after(ex);
    // In: (tensor-memory address, register count, the thread's registers).
    let input = (taddr, n, regs as usize);
    let scope = Scope::Warp { warp, mask: u32::MAX };
    let (ex, ()) = ex.collective(scope, members, input, |ex, members, inputs, _: &mut [()]| {
        uniform(members, inputs, |s| s.0, "the tensor-memory address")?;
        uniform(members, inputs, |s| s.1, "the register count")?;
        if !n.is_power_of_two() || n > 128 {
            return Err((ErrorKind::Tcgen05, format!("tcgen05.ld .32x32b.x{n}: the count must be 1, 2, 4, ..., 128")));
        }
        let (lane, column) = (lane_of(taddr), column_of(taddr));
        let quarter = warp % 4;
        if lane != 32 * quarter {
            return Err((
                ErrorKind::Tcgen05,
                format!(
                    "warp {warp} may access only tensor-memory lanes {}..{} (lane quarter warp % 4 = {quarter}), but \
                     tcgen05.ld address {taddr:#010x} starts at lane {lane}",
                    32 * quarter,
                    32 * quarter + 31
                ),
            ));
        }
        let cols = column..column + n;
        let unit = &mut ex.st.units.get_mut::<Tcgen05Unit>();
        unit.check_allocated(cols.clone(), "tcgen05.ld")?;
        if let Some((t, op)) = unit.find_pending(|o| overlap(&o.writes(), &cols)) {
            return Err((
                ErrorKind::Tcgen05,
                format!(
                    "reads tensor-memory columns {}..{} that the pending {} by thread {t} will write: wait for its \
                     tcgen05.commit's mbarrier (then tcgen05.fence::after_thread_sync) first",
                    cols.start,
                    cols.end,
                    op.at()
                ),
            ));
        }
        let loc = ex.loc;
        let tmem = unit.tmem.as_ref().expect("allocated");
        for (i, (&m, &(_, _, regs))) in members.iter().zip(inputs).enumerate() {
            let start = Tmem::at(lane + i as u32, column);
            let values = tmem.cells[start..start + n as usize].to_vec();
            // SAFETY: the caller of `ld_32x32b` guarantees `n` live registers at each pointer.
            unsafe { std::slice::from_raw_parts_mut(regs as *mut u32, n as usize) }.fill(LD_POISON);
            let q = &mut unit.threads[m as usize];
            q.loads.push(PendingLd { regs, values });
            q.ld_unfenced.get_or_insert_with(|| (loc, Vec::new())).1.push(cols.clone());
        }
        Ok(())
    });
    drop(ex);
}

/// `tcgen05.wait::ld.sync.aligned;` — warp collective: every earlier `ld` of each thread
/// delivers its values.
#[track_caller]
pub fn wait_ld() {
    let ex = exec("tcgen05.wait::ld.sync.aligned");
    if ex.dropped() {
        return;
    }
    let (ex, warp, members) = full_warp(ex);
    let (ex, ()) = ex.collective(Scope::Warp { warp, mask: u32::MAX }, members, (), |ex, members, _, _: &mut [()]| {
        for &m in members {
            let loads = std::mem::take(&mut ex.st.units.get_mut::<Tcgen05Unit>().threads[m as usize].loads);
            // SAFETY (both loops): guaranteed live until this wait by the caller of `ld_32x32b`.
            for ld in &loads {
                let regs = unsafe { std::slice::from_raw_parts(ld.regs as *const u32, ld.values.len()) };
                if let Some(i) = regs.iter().position(|&r| r != LD_POISON) {
                    return Err((
                        ErrorKind::Tcgen05,
                        format!(
                            "thread {m} wrote destination register {i} of a tcgen05.ld before this tcgen05.wait::ld \
                             (the load may still be writing it)"
                        ),
                    ));
                }
            }
            for ld in loads {
                unsafe { std::slice::from_raw_parts_mut(ld.regs as *mut u32, ld.values.len()) }
                    .copy_from_slice(&ld.values);
            }
        }
        Ok(())
    });
    drop(ex);
}

/// `tcgen05.fence::before_thread_sync;` — orders this thread's earlier tcgen05 operations
/// (here: its `ld`s) before its next synchronisation.
#[track_caller]
pub fn fence_before_thread_sync() {
    let mut ex = exec("tcgen05.fence::before_thread_sync");
    if ex.dropped() {
        return;
    }
    let me = ex.me as usize;
    ex.st.units.get_mut::<Tcgen05Unit>().threads[me].ld_unfenced = None;
}

/// `tcgen05.fence::after_thread_sync;` — orders this thread's later tcgen05 operations
/// after its preceding synchronisation.
#[track_caller]
pub fn fence_after_thread_sync() {
    let mut ex = exec("tcgen05.fence::after_thread_sync");
    if ex.dropped() {
        return;
    }
    let me = ex.me as usize;
    ex.st.units.get_mut::<Tcgen05Unit>().threads[me].synced = None;
}
