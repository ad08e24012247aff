//! The tcgen05 unit (instructions in `ops::tcgen05`, whose module doc describes the
//! model): tensor memory, its allocations, and each thread's `cp`/`mma` operations and
//! `commit` arrivals in flight. An op executes when a commit's arrival is needed and no
//! thread can run without it (see `units::complete_one_lazy`); at the end of the CTA ops
//! never committed and allocations never freed are reported.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use super::AsyncUnit;
use crate::cta::{Cta, CtaState};
use crate::model::tcgen05::{InstrDesc, MMA_M, ROW_BYTES, TMEM_COLUMNS, TMEM_LANES, mma_block_scale_4x, scale_value};
use crate::report::{EmuError, ErrorKind, Loc};

/// What a never-written tensor-memory cell holds: a quiet NaN with a recognisable payload,
/// so accumulating onto a fresh accumulator poisons the result.
pub const TMEM_POISON: u32 = 0x7FDE_AD01;
/// Tensor memory: `cells[lane * 512 + column]`, and whether each cell was written since
/// its allocation (a scale factor read from an unwritten cell is reported).
pub(crate) struct Tmem {
    pub cells: Vec<u32>,
    pub written: Vec<bool>,
}

impl Tmem {
    pub fn new() -> Tmem {
        let n = (TMEM_LANES * TMEM_COLUMNS) as usize;
        Tmem { cells: vec![TMEM_POISON; n], written: vec![false; n] }
    }
    pub fn at(lane: u32, column: u32) -> usize {
        (lane * TMEM_COLUMNS + column) as usize
    }
    pub fn write(&mut self, lane: u32, column: u32, value: u32) {
        let i = Tmem::at(lane, column);
        self.cells[i] = value;
        self.written[i] = true;
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Allocation {
    pub columns: u32,
    pub loc: Loc,
}

pub(crate) enum OpKind {
    /// `cp.32x128b.warpx4`: the shared address of each of the 32 source rows (16 bytes).
    Cp { rows: Vec<u32>, column: u32 },
    Mma {
        d: u32,
        idesc: InstrDesc,
        /// Shared addresses of the 16-byte chunks: row r's at `2r` and `2r + 1`.
        a_chunks: Vec<u32>,
        b_chunks: Vec<u32>,
        sfa: u32,
        sfb: u32,
        accumulate: bool,
    },
}

/// One issued `cp` or `mma`, not yet executed.
pub(crate) struct Op {
    pub sequence: u64,
    pub kind: OpKind,
    pub loc: Loc,
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self.kind {
            OpKind::Cp { .. } => "tcgen05.cp",
            OpKind::Mma { .. } => "tcgen05.mma",
        }
    }
    /// TMEM columns (all 128 lanes) it writes.
    pub fn writes(&self) -> Range<u32> {
        match self.kind {
            OpKind::Cp { column, .. } => column..column + 4,
            OpKind::Mma { d, idesc, .. } => d..d + idesc.n,
        }
    }
    /// TMEM columns (all 128 lanes: the scale replicas, the accumulator) it reads.
    pub fn reads(&self) -> Vec<Range<u32>> {
        match self.kind {
            OpKind::Cp { .. } => Vec::new(),
            OpKind::Mma { d, idesc, sfa, sfb, accumulate, .. } => {
                let mut r = vec![sfa..sfa + 4, sfb..sfb + sfb_columns(idesc.n)];
                if accumulate {
                    r.push(d..d + idesc.n);
                }
                r
            }
        }
    }
    /// The 16-byte shared chunks it reads.
    pub fn smem_chunks(&self) -> impl Iterator<Item = u32> + '_ {
        let (x, y): (&[u32], &[u32]) = match &self.kind {
            OpKind::Cp { rows, .. } => (rows, &[]),
            OpKind::Mma { a_chunks, b_chunks, .. } => (a_chunks, b_chunks),
        };
        x.iter().chain(y).copied()
    }
    pub fn at(&self) -> String {
        format!("{} issued at {}:{}", self.name(), self.loc.file(), self.loc.line())
    }
}

/// Columns of SFB one MMA reads: row n of B is column `n / 32`.
pub(crate) fn sfb_columns(n: u32) -> u32 {
    n.div_ceil(32)
}

/// A `commit`: one arrival on `mbarrier` once every op of the thread up to `after` is done.
pub(crate) struct Commit {
    pub after: u64,
    pub mbarrier: u32,
    pub loc: Loc,
}

/// An `ld` waiting for `wait_ld`: the registers and the values they will receive.
pub(crate) struct PendingLd {
    pub regs: usize,
    pub values: Vec<u32>,
}

#[derive(Default)]
pub(crate) struct ThreadUnit {
    pub ops: VecDeque<Op>,
    pub commits: VecDeque<Commit>,
    pub last_issued: u64,
    pub loads: Vec<PendingLd>,
    /// A synchronisation this thread completed with no `fence::after_thread_sync` since.
    pub synced: Option<(&'static str, Loc)>,
    /// The first `ld` this thread issued with no `fence::before_thread_sync` since, and
    /// the columns of all such `ld`s.
    pub ld_unfenced: Option<(Loc, Vec<Range<u32>>)>,
}

/// The CTA's tcgen05 state: tensor memory, allocations, and each thread's async work.
pub(crate) struct Tcgen05Unit {
    pub tmem: Option<Box<Tmem>>,
    /// By first column.
    pub allocations: BTreeMap<u32, Allocation>,
    pub relinquished: Option<Loc>,
    pub threads: Vec<ThreadUnit>,
}

impl Tcgen05Unit {
    /// Whether an allocation of `columns` would succeed now.
    pub fn has_room(&self, columns: u32) -> bool {
        self.first_fit(columns).is_some()
    }

    pub fn first_fit(&self, columns: u32) -> Option<u32> {
        (0..TMEM_COLUMNS).step_by(columns.max(1) as usize).find(|&c| {
            c + columns <= TMEM_COLUMNS && self.allocations.iter().all(|(&s, a)| c + columns <= s || s + a.columns <= c)
        })
    }

    /// `commit` arrivals on `mbar` not yet made (for deadlock reports).
    pub fn commit_arrivals(&self, mbar: u32) -> usize {
        self.threads.iter().map(|t| t.commits.iter().filter(|c| c.mbarrier == mbar).count()).sum()
    }

    /// The oldest op some commit waits for: (its sequence, its thread).
    pub fn oldest_observed(&self) -> Option<(u64, u32)> {
        self.threads
            .iter()
            .enumerate()
            .filter_map(|(t, q)| {
                let c = q.commits.front()?;
                let op = q.ops.front()?;
                (op.sequence <= c.after).then_some((op.sequence, t as u32))
            })
            .min()
    }

    /// For deadlock reports: the threads holding tcgen05 ops that no commit follows (their
    /// completion can never be observed).
    pub fn uncommitted_summary(&self) -> Option<String> {
        let lines: Vec<String> = self
            .threads
            .iter()
            .enumerate()
            .filter_map(|(t, q)| {
                let committed = q.commits.back().map_or(0, |c| c.after);
                let first = q.ops.iter().find(|o| o.sequence > committed)?;
                let count = q.ops.iter().filter(|o| o.sequence > committed).count();
                Some(format!("thread {t} holds {count} uncommitted tcgen05 op(s), the first the {}", first.at()))
            })
            .collect();
        (!lines.is_empty()).then(|| lines.join("; "))
    }

    /// A description of the allocations, for reports.
    pub fn allocations_summary(&self) -> String {
        if self.allocations.is_empty() {
            return "none".into();
        }
        let list: Vec<String> = self
            .allocations
            .iter()
            .map(|(s, a)| format!("columns {s}..{} (at {}:{})", s + a.columns, a.loc.file(), a.loc.line()))
            .collect();
        list.join(", ")
    }

    /// Checks that columns `cols` lie inside one allocation.
    pub fn check_allocated(&self, cols: Range<u32>, what: &str) -> Result<(), (ErrorKind, String)> {
        let inside = self.allocations.range(..=cols.start).next_back().is_some_and(|(&s, a)| cols.end <= s + a.columns);
        if inside {
            return Ok(());
        }
        Err((
            ErrorKind::Tcgen05,
            format!(
                "{what}: tensor-memory columns {}..{} are not inside one allocation (allocated: {})",
                cols.start,
                cols.end,
                self.allocations_summary()
            ),
        ))
    }

    /// Why a `cp` by thread `me` into columns `cols` may not be issued now, if it may not.
    /// The PTX pipelines (ISA 9.7.16.6) order a thread's `cp` before its later `mma`, but
    /// neither `mma` → `cp` nor `cp` → `cp`: a pending op that reads or writes the columns
    /// (of any thread) races with the copy.
    pub fn cp_conflict(&self, me: u32, cols: &Range<u32>) -> Option<String> {
        let (c0, c1) = (cols.start, cols.end);
        let ops = || self.threads.iter().enumerate().flat_map(|(t, q)| q.ops.iter().map(move |o| (t as u32, o)));
        if let Some((t, o)) = ops().find(|(_, o)| o.reads().iter().any(|r| overlap(r, cols))) {
            return Some(if t == me {
                format!(
                    "overwrites tensor-memory columns {c0}..{c1} that this thread's pending {} still reads: the PTX \
                     ordering rules order cp before a later mma of the same thread, not mma before a later cp (use \
                     separate scale columns per pipeline stage, or wait for the mma's commit first)",
                    o.at()
                )
            } else {
                format!(
                    "overwrites tensor-memory columns {c0}..{c1} that the pending {} by thread {t} still reads",
                    o.at()
                )
            });
        }
        if let Some((t, o)) = ops().find(|(_, o)| overlap(&o.writes(), cols)) {
            return Some(if t == me {
                format!(
                    "writes tensor-memory columns {c0}..{c1} that this thread's pending {} also writes: the PTX \
                     ordering rules do not order {} before a later cp, so the final contents are undefined",
                    o.at(),
                    o.name()
                )
            } else {
                format!(
                    "writes tensor-memory columns {c0}..{c1} that the pending {} by thread {t} also writes (unordered)",
                    o.at()
                )
            });
        }
        None
    }

    /// Why an `mma` by thread `me` into the accumulator at column `d` (`n` columns), with
    /// scale factors in `scales`, may not be issued now, if it may not. Another thread's
    /// pending op may not touch the accumulator or write the scales. Of this thread's own
    /// pending ops, `cp`s are ordered before it, but an earlier `mma` only when it has the
    /// same accumulator (address and shape: PTX ISA 9.7.16.6's pipeline "same N and
    /// accumulator, shape and kind").
    pub fn mma_conflict(&self, me: u32, d: u32, n: u32, scales: &[Range<u32>; 2]) -> Option<String> {
        let d_cols = d..d + n;
        for (t, q) in self.threads.iter().enumerate() {
            for o in &q.ops {
                let writes = o.writes();
                let touches_d = overlap(&writes, &d_cols) || o.reads().iter().any(|r| overlap(r, &d_cols));
                let writes_scales = scales.iter().any(|c| overlap(&writes, c));
                if t as u32 != me {
                    if touches_d || writes_scales {
                        return Some(format!(
                            "uses tensor memory that the pending {} by thread {t} also uses (columns of its accumulator \
                             or scale factors): operations of different threads are not ordered",
                            o.at()
                        ));
                    }
                    continue;
                }
                let OpKind::Mma { d: od, idesc: oid, sfa, sfb, .. } = o.kind else { continue };
                let same_accumulator = od == d && oid.n == n;
                let unordered = if overlap(&writes, &d_cols) && !same_accumulator {
                    Some(format!(
                        "writes accumulator columns {od}..{} that overlap this mma's {}..{}",
                        od + oid.n,
                        d,
                        d + n
                    ))
                } else if [sfa..sfa + 4, sfb..sfb + sfb_columns(oid.n)].iter().any(|r| overlap(r, &d_cols)) {
                    Some("reads, as scale factors, columns this mma's accumulator overwrites".to_string())
                } else if writes_scales && !same_accumulator {
                    Some("writes columns this mma reads as scale factors".to_string())
                } else {
                    None
                };
                if let Some(what) = unordered {
                    return Some(format!(
                        "this thread's pending {} {what}: the PTX pipelines order mma before mma only for the same \
                         accumulator (address and shape), so the two are unordered",
                        o.at()
                    ));
                }
            }
        }
        None
    }

    /// The pending op of any thread that `overlaps` (given the op) first, with its thread.
    pub fn find_pending(&self, overlaps: impl Fn(&Op) -> bool) -> Option<(u32, &Op)> {
        self.threads.iter().enumerate().find_map(|(t, q)| q.ops.iter().find(|o| overlaps(o)).map(|o| (t as u32, o)))
    }
}

impl AsyncUnit for Tcgen05Unit {
    fn new(threads: usize) -> Tcgen05Unit {
        Tcgen05Unit {
            tmem: None,
            allocations: BTreeMap::new(),
            relinquished: None,
            threads: (0..threads).map(|_| ThreadUnit::default()).collect(),
        }
    }

    fn oldest_pending(&self) -> Option<(u64, u32)> {
        self.oldest_observed()
    }

    fn complete_oldest(_cta: &Cta<'_>, st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
        complete_oldest(st, thread)
    }

    fn mbarrier_in_flight(&self, addr: u32) -> Option<String> {
        Some(format!("{} tcgen05.commit arrivals", self.commit_arrivals(addr)))
    }

    fn deadlock_note(&self) -> Option<String> {
        self.uncommitted_summary().map(|u| format!("({u}: no tcgen05.commit follows them)"))
    }

    fn end_of_cta(st: &mut CtaState) -> Result<(), EmuError> {
        end_of_cta(st)
    }

    /// `tcgen05.alloc` of `columns` columns waits for room.
    fn wait_satisfied(&self, columns: u32) -> bool {
        self.has_room(columns)
    }

    fn describe_wait(&self, columns: u32) -> String {
        format!("for {columns} free tensor-memory columns (allocated: {})", self.allocations_summary())
    }

    /// Whether thread `thread` may signal other threads now (an arrive or `bar.sync`): not
    /// while a `tcgen05.ld` of it is unordered by `fence::before_thread_sync`.
    fn check_before_sync(&self, thread: u32) -> Result<(), (ErrorKind, String)> {
        match &self.threads[thread as usize].ld_unfenced {
            Some((at, _)) => Err((
                ErrorKind::Tcgen05,
                format!(
                    "this thread's tcgen05.ld at {}:{} is not ordered before this synchronisation: missing \
                     tcgen05.fence::before_thread_sync between them",
                    at.file(),
                    at.line()
                ),
            )),
            None => Ok(()),
        }
    }

    /// Thread `thread` completed a synchronisation (`instruction` at `loc`): its next
    /// tcgen05 operation needs a `fence::after_thread_sync` first.
    fn synchronised(&mut self, thread: u32, instruction: &'static str, loc: Loc) {
        self.threads[thread as usize].synced = Some((instruction, loc));
    }
}

pub(crate) fn overlap(a: &Range<u32>, b: &Range<u32>) -> bool {
    a.start < b.end && b.start < a.end
}

/// Makes the arrivals of thread `thread`'s commits whose ops have all completed.
pub(crate) fn fire_commits(st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
    loop {
        let q = &mut st.units.get_mut::<Tcgen05Unit>().threads[thread as usize];
        let Some(first) = q.commits.front() else { return Ok(()) };
        if q.ops.front().is_some_and(|o| o.sequence <= first.after) {
            return Ok(());
        }
        let c = q.commits.pop_front().expect("present");
        let fail = |m: String| {
            EmuError::new(ErrorKind::Mbarrier, "tcgen05.commit", format!("mbarrier {:#x}: {m}", c.mbarrier))
                .at(thread, c.loc)
        };
        let m = st.mbarriers.get(&c.mbarrier).ok_or_else(|| fail("no longer exists".into()))?;
        // The arrival comes from the tensor core once its operations complete: an
        // async-proxy operation on the mbarrier, like a bulk copy's complete_tx, so the
        // init must have been published to the async proxy (reading of PTX 9.7.16.12.1 and
        // 9.7.13.4: the strict one, as for bulk copies in `bulk::complete_front`).
        if !m.init_fenced {
            return Err(fail(format!(
                "tcgen05.commit (an async-proxy arrival) signals this mbarrier, whose init ({}:{}) was never \
                 fenced with fence.mbarrier_init or fence.proxy.async",
                m.init_loc.file(),
                m.init_loc.line()
            )));
        }
        // The arrival releases the issuing thread's accesses, the completed reads included.
        crate::race::mbarrier_signal(st, c.mbarrier, Some(thread), |m| m.arrive(1)).map_err(fail)?;
    }
}

/// Executes thread `thread`'s oldest pending op, then makes the arrivals it enables.
fn complete_oldest(st: &mut CtaState, thread: u32) -> Result<(), EmuError> {
    let Some(op) = st.units.get_mut::<Tcgen05Unit>().threads[thread as usize].ops.pop_front() else { return Ok(()) };
    let result = execute(st, &op);
    // The reads are remembered at the issuer's clock now, so the commit's arrival releases them.
    for addr in op.smem_chunks() {
        let i = (addr - st.smem.base) as usize;
        crate::race::async_read(st, thread, i, 16, op.loc, true)
            .map_err(|m| EmuError::new(ErrorKind::DataRace, op.name(), m).at(thread, op.loc))?;
    }
    let smem = &mut st.smem;
    for addr in op.smem_chunks() {
        let i = (addr - smem.base) as usize;
        smem.async_readers[i..i + 16].iter_mut().for_each(|r| *r -= 1);
    }
    result.map_err(|(kind, m)| EmuError::new(kind, op.name(), m).at(thread, op.loc))?;
    fire_commits(st, thread)
}

fn execute(st: &mut CtaState, op: &Op) -> Result<(), (ErrorKind, String)> {
    let smem = &st.smem;
    let chunk = |addr: u32| {
        let i = (addr - smem.base) as usize;
        &smem.bytes[i..i + 16]
    };
    let tmem = st.units.get_mut::<Tcgen05Unit>().tmem.as_mut().expect("an op implies an allocation");
    match &op.kind {
        OpKind::Cp { rows, column } => {
            for (r, &addr) in rows.iter().enumerate() {
                let bytes = chunk(addr);
                for q in 0..4 {
                    for j in 0..4 {
                        let word = u32::from_le_bytes(bytes[4 * j..4 * j + 4].try_into().expect("4 bytes"));
                        tmem.write(r as u32 + 32 * q, column + j as u32, word);
                    }
                }
            }
            Ok(())
        }
        OpKind::Mma { d, idesc, a_chunks, b_chunks, sfa, sfb, accumulate } => {
            let n = idesc.n as usize;
            let gather =
                |chunks: &[u32]| -> Vec<u8> { chunks.iter().flat_map(|&c| chunk(c).iter().copied()).collect() };
            let (a, b) = (gather(a_chunks), gather(b_chunks));
            debug_assert_eq!(a.len(), MMA_M * ROW_BYTES as usize);
            let scales = |rows: usize, base: u32, which: &str| -> Result<Vec<f64>, (ErrorKind, String)> {
                let mut out = Vec::with_capacity(rows * 4);
                for r in 0..rows as u32 {
                    let (lane, column) = (r % 32, base + r / 32);
                    let first = Tmem::at(lane, column);
                    for q in 0..4 {
                        let i = Tmem::at(lane + 32 * q, column);
                        if !tmem.written[i] {
                            return Err((
                                ErrorKind::Tcgen05,
                                format!(
                                    "the scale factors of {which} row {r} are read from lane {}, column {column}, which \
                                     nothing wrote since its allocation (missing tcgen05.cp?)",
                                    lane + 32 * q
                                ),
                            ));
                        }
                        if tmem.cells[i] != tmem.cells[first] {
                            return Err((
                                ErrorKind::Tcgen05,
                                format!(
                                    "the scale factors of {which} row {r} differ between their replicas: lane {lane} \
                                     holds {:#010x}, lane {} holds {:#010x} (column {column}); with .scale_vec::4X the \
                                     hardware may read any of the four lane quarters, so all must be equal \
                                     (tcgen05.cp .32x128b.warpx4 writes all four)",
                                    tmem.cells[first],
                                    lane + 32 * q,
                                    tmem.cells[i]
                                ),
                            ));
                        }
                    }
                    for byte in tmem.cells[first].to_le_bytes() {
                        out.push(scale_value(byte, idesc.scale).map_err(|m| {
                            (ErrorKind::Tcgen05, format!("scale factor of {which} row {r} (column {column}): {m}"))
                        })?);
                    }
                }
                Ok(out)
            };
            let sa = scales(MMA_M, *sfa, "A")?;
            let sb = scales(n, *sfb, "B")?;
            let mut acc = vec![0f32; MMA_M * n];
            if *accumulate {
                for (m, row) in acc.chunks_exact_mut(n).enumerate() {
                    let i = Tmem::at(m as u32, *d);
                    row.iter_mut().zip(&tmem.cells[i..i + n]).for_each(|(v, &c)| *v = f32::from_bits(c));
                }
            }
            let negate = idesc.negate_a != idesc.negate_b;
            mma_block_scale_4x(n, &a, &b, &sa, &sb, negate, &mut acc, *accumulate)
                .map_err(|m| (ErrorKind::Tcgen05, m))?;
            for (m, row) in acc.chunks_exact(n).enumerate() {
                let i = Tmem::at(m as u32, *d);
                tmem.cells[i..i + n].iter_mut().zip(row).for_each(|(c, v)| *c = v.to_bits());
                tmem.written[i..i + n].fill(true);
            }
            Ok(())
        }
    }
}

/// End-of-CTA checks, once every thread has exited: ops never committed are reported;
/// committed ones complete (as the hardware would finish them); allocations still held
/// are a leak.
fn end_of_cta(st: &mut CtaState) -> Result<(), EmuError> {
    for (t, q) in st.units.get_mut::<Tcgen05Unit>().threads.iter().enumerate() {
        let committed = q.commits.back().map_or(0, |c| c.after);
        if let Some(op) = q.ops.iter().find(|o| o.sequence > committed) {
            let message = format!(
                "thread {t} exited with the {} never committed: no tcgen05.commit follows it, so nothing can \
                 observe its completion",
                op.at()
            );
            return Err(EmuError::new(ErrorKind::Tcgen05, "exit", message).at(t as u32, op.loc));
        }
    }
    while let Some((_, t)) = st.units.get_mut::<Tcgen05Unit>().oldest_observed() {
        complete_oldest(st, t)?;
    }
    if let Some((&column, a)) = st.units.get_mut::<Tcgen05Unit>().allocations.iter().next() {
        let message = format!(
            "the CTA exited holding tensor-memory columns {column}..{} allocated at {}:{}: every allocation must be \
             freed with tcgen05.dealloc before exit",
            column + a.columns,
            a.loc.file(),
            a.loc.line()
        );
        let mut e = EmuError::new(ErrorKind::Tcgen05, "exit", message);
        e.location = Some(a.loc);
        return Err(e);
    }
    Ok(())
}
