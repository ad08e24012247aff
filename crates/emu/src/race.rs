//! Data-race detection for shared memory: happens-before with vector clocks.
//!
//! The baton scheduler runs one thread at a time, so memory under emulation is always
//! sequentially consistent and a missing barrier goes unnoticed whenever the schedule
//! happens to order the two accesses. This module tracks what the PTX memory model
//! actually guarantees instead: every CTA thread has a vector clock, synchronisation
//! joins clocks, and every shared-memory byte remembers its last write and the reads
//! since then (FastTrack-style epochs: a read set only while reads are concurrent). Two
//! accesses to one byte, at least one a write, by different threads, with neither
//! ordered before the other, are a data race, reported with both source lines.
//!
//! Synchronisation edges (release → acquire):
//! - `bar.sync` / `bar.arrive`: every arrival releases into the barrier's generation;
//!   when the generation completes, the `bar.sync` threads of it acquire (a `bar.arrive`
//!   never acquires).
//! - mbarrier: every arrive-on operation releases into the current phase, whoever
//!   performs it: a thread's `mbarrier.arrive`, or an asynchronous unit on behalf of the
//!   thread that issued it (a `cp.async.mbarrier.arrive` trigger, a bulk copy's
//!   `complete_tx`, a `tcgen05.commit`): see [`mbarrier_signal`]. A `try_wait` /
//!   `test_wait` that observes the phase completed acquires everything released into it.
//! - warp and warpgroup collectives (`shfl.sync`, `elect.sync`, `wgmma.*`): the members
//!   join their clocks when the collective completes.
//! - asynchronous writes are attributed to the issuing thread at completion: a `cp.async`
//!   completed by `wait_group` is ordered before the issuer's next instruction, and one
//!   completed for an mbarrier (like a bulk copy) before the arrival its completion makes.
//!   Their destination is also checked at issue: the copy may land any time after it.
//! - wgmma reads its shared operands on behalf of its warpgroup: checked at issue (every
//!   write to them must be ordered before it) and recorded at the `wgmma.wait_group` that
//!   completes it (a later write must be ordered after that wait).
//!
//! Approximations: an asynchronous unit's arrival releases its issuer's clock at the
//! unit's completion, so it also covers what the issuer did after issuing it (possible
//! missed races, never false ones); a waiter that falls a whole phase behind acquires the
//! latest completed phase.
//!
//! Not modelled: fences alone (`fence.acq_rel`, `membar`) create no edge (the emulator
//! has no atomics or volatile flags to pair them with); global and tensor memory are not
//! tracked; mbarrier objects are synchronisation objects, not data.
//!
//! Cost: one vector clock per thread (threads² words per CTA), 16 bytes of shadow per
//! shared byte, and per access a check of each byte touched.

use std::collections::HashMap;

use crate::cta::Mbarrier;
use crate::cta::{CtaState, NAMED_BARRIERS};
use crate::ops::Exec;
use crate::report::{EmuError, ErrorKind, Loc};
use crate::sched::{ThreadState, Wait};

/// What kind of shared-memory access, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// `ld.shared`.
    Read,
    /// `st.shared`.
    Write,
    /// The destination write of a `cp.async`.
    CpAsync,
    /// The destination write of a bulk (TMA) copy.
    Bulk,
    /// A wgmma's shared operand read.
    Wgmma,
    /// A shared read by another asynchronous unit on behalf of one issuing thread
    /// (tcgen05.mma operands, tcgen05.cp sources).
    AsyncRead,
}

impl Kind {
    fn is_write(self) -> bool {
        matches!(self, Kind::Write | Kind::CpAsync | Kind::Bulk)
    }
}

/// One access of one byte: its thread (+1; 0 = no access) at its clock, and an interned
/// (source line, kind). A `tid` of [`SHARED`] marks a set of concurrent reads, `clock`
/// being its index in [`Race::sets`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Access {
    clock: u32,
    tid: u16,
    tag: u16,
}

const SHARED: u16 = u16::MAX;
/// Read-set entries after which unreferenced sets are collected.
const SET_ENTRIES_LIMIT: usize = 1 << 20;

/// Releases into one mbarrier: the phase being assembled and the last completed one.
#[derive(Clone, Debug, Default)]
struct Phases {
    current: Vec<u32>,
    completed: Vec<u32>,
    /// The mbarrier's phase number when `current` started to be assembled.
    phase: u64,
}

impl Phases {
    fn new(n: usize) -> Phases {
        Phases { current: vec![0; n], completed: vec![0; n], phase: 0 }
    }

    /// Catches up with the mbarrier's phase number `phase`: if it moved on (through
    /// [`mbarrier_signal`], or an arrival that bypassed it), the phase being assembled
    /// has completed.
    fn sync(&mut self, phase: u64) -> bool {
        if phase == self.phase {
            return false;
        }
        let n = self.current.len();
        self.completed = std::mem::replace(&mut self.current, vec![0; n]);
        self.phase = phase;
        true
    }
}

/// The happens-before state of one CTA.
pub(crate) struct Race {
    n: usize,
    /// Vector clocks, thread-major: `vc[t * n + u]` is what thread t knows of thread u.
    vc: Vec<u32>,
    /// Per named barrier: the join of the current generation's arrivals.
    bars: Vec<Vec<u32>>,
    /// Per mbarrier address.
    phases: HashMap<u32, Phases>,
    /// Shared-window address of byte 0.
    base: u32,
    /// Per byte: the last write, and the reads since (one, or a set).
    writes: Vec<Access>,
    reads: Vec<Access>,
    sets: Vec<Vec<Access>>,
    set_entries: usize,
    /// The last read-state transition (old, new read, result): the bytes of one access
    /// nearly always share it.
    transition: Option<(Access, Access, Access)>,
    /// Interned (source line, kind); tag 0 is "unknown" (when more than 65535 exist).
    tags: Vec<Option<(Loc, Kind)>>,
    tag_ids: HashMap<(usize, Kind), u16>,
}

fn join(dst: &mut [u32], src: &[u32]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d = (*d).max(s));
}

impl Race {
    pub fn new(threads: usize, base: u32, smem_len: usize) -> Race {
        let mut vc = vec![0; threads * threads];
        (0..threads).for_each(|t| vc[t * threads + t] = 1);
        Race {
            n: threads,
            vc,
            bars: vec![vec![0; threads]; NAMED_BARRIERS as usize],
            phases: HashMap::new(),
            base,
            writes: vec![Access::default(); smem_len],
            reads: vec![Access::default(); smem_len],
            sets: Vec::new(),
            set_entries: 0,
            transition: None,
            tags: vec![None],
            tag_ids: HashMap::new(),
        }
    }

    fn vc(&self, t: u32) -> &[u32] {
        let n = self.n;
        &self.vc[t as usize * n..(t as usize + 1) * n]
    }

    fn vc_mut(&mut self, t: u32) -> &mut [u32] {
        let n = self.n;
        &mut self.vc[t as usize * n..(t as usize + 1) * n]
    }

    fn clock(&self, t: u32) -> u32 {
        self.vc[t as usize * self.n + t as usize]
    }

    fn tick(&mut self, t: u32) {
        self.vc[t as usize * self.n + t as usize] += 1;
    }

    /// Joins thread `t`'s clock into `dst` (a release), then advances `t`'s own clock so
    /// its later accesses are not covered by it.
    fn release(&mut self, t: u32, dst: &mut [u32]) {
        join(dst, self.vc(t));
        self.tick(t);
    }

    fn acquire(&mut self, t: u32, src: &[u32]) {
        join(self.vc_mut(t), src);
    }

    /// The members of a collective that just completed: each learns what all knew.
    pub fn join_members(&mut self, members: &[u32]) {
        let mut all = vec![0; self.n];
        members.iter().for_each(|&m| join(&mut all, self.vc(m)));
        for &m in members {
            self.vc_mut(m).copy_from_slice(&all);
            self.tick(m);
        }
    }

    /// An arrival of thread `t` on named barrier `id`.
    pub fn bar_arrive(&mut self, id: u32, t: u32) {
        let mut clock = std::mem::take(&mut self.bars[id as usize]);
        self.release(t, &mut clock);
        self.bars[id as usize] = clock;
    }

    /// Generation `generation` of barrier `id` completed: its waiters (the threads
    /// blocked in `bar.sync` on it, and `completer` when it is one) acquire.
    pub fn bar_complete(&mut self, id: u32, generation: u64, threads: &[ThreadState], completer: Option<u32>) {
        let clock = std::mem::replace(&mut self.bars[id as usize], vec![0; self.n]);
        for (t, state) in threads.iter().enumerate() {
            if let ThreadState::Blocked { wait: Wait::Bar { id: i, generation: g }, .. } = state
                && *i == id
                && *g == generation
            {
                self.acquire(t as u32, &clock);
            }
        }
        if let Some(t) = completer {
            self.acquire(t, &clock);
        }
    }

    /// `mbarrier.init` at `addr`: a fresh object with nothing released into it.
    pub fn mbarrier_init(&mut self, addr: u32) {
        self.phases.insert(addr, Phases::new(self.n));
    }

    fn phases(&mut self, addr: u32) -> &mut Phases {
        let n = self.n;
        self.phases.entry(addr).or_insert_with(|| Phases::new(n))
    }

    /// Thread `t` observed the last completed phase of the mbarrier at `addr`, whose
    /// phase number is now `phase`.
    pub fn mbarrier_acquire(&mut self, addr: u32, phase: u64, t: u32) {
        self.phases(addr).sync(phase);
        let clock = std::mem::take(&mut self.phases(addr).completed);
        self.acquire(t, &clock);
        self.phases(addr).completed = clock;
    }

    fn tag(&mut self, loc: Loc, kind: Kind) -> u16 {
        let key = (loc as *const _ as usize, kind);
        if let Some(&t) = self.tag_ids.get(&key) {
            return t;
        }
        if self.tags.len() > u16::MAX as usize - 1 {
            return 0;
        }
        let t = self.tags.len() as u16;
        self.tags.push(Some((loc, kind)));
        self.tag_ids.insert(key, t);
        t
    }

    fn ordered(vc: &[u32], a: Access) -> bool {
        a.tid == 0 || a.clock <= vc[a.tid as usize - 1]
    }

    /// Checks an access of bytes `[i, i + len)` by thread `t` (whose clock decides what
    /// is ordered before it) and, when `record`, remembers it with clock `clock`.
    /// Returns the race report of the first unordered conflicting access.
    #[allow(clippy::too_many_arguments)]
    fn access(
        &mut self,
        t: u32,
        clock: u32,
        i: usize,
        len: usize,
        kind: Kind,
        loc: Loc,
        record: bool,
    ) -> Result<(), String> {
        let tag = self.tag(loc, kind);
        let me = Access { clock, tid: t as u16 + 1, tag };
        let n = self.n;
        let vc_range = t as usize * n..(t as usize + 1) * n;
        for b in i..i + len {
            let vc = &self.vc[vc_range.clone()];
            let w = self.writes[b];
            if !Self::ordered(vc, w) {
                return Err(self.report(b, me, kind, loc, w));
            }
            let r = self.reads[b];
            if kind.is_write() {
                if r.tid == SHARED {
                    if let Some(&a) = self.sets[r.clock as usize].iter().find(|&&a| !Self::ordered(vc, a)) {
                        return Err(self.report(b, me, kind, loc, a));
                    }
                } else if !Self::ordered(vc, r) {
                    return Err(self.report(b, me, kind, loc, r));
                }
                if record {
                    self.writes[b] = me;
                    self.reads[b] = Access::default();
                }
            } else if record {
                self.reads[b] = self.read_transition(vc_range.clone(), r, me);
            }
        }
        if self.set_entries > SET_ENTRIES_LIMIT {
            self.collect_sets();
        }
        Ok(())
    }

    /// The read state of a byte after read `me` when it was `old`: reads ordered before
    /// `me` are dropped (a write ordered after `me` is ordered after them too).
    fn read_transition(&mut self, vc_range: std::ops::Range<usize>, old: Access, me: Access) -> Access {
        if let Some((o, m, result)) = self.transition
            && o == old
            && m == me
        {
            return result;
        }
        let vc = &self.vc[vc_range];
        let keep = |a: &Access| a.tid != me.tid && !Self::ordered(vc, *a);
        let result = if old.tid == SHARED {
            let mut set: Vec<Access> = self.sets[old.clock as usize].iter().copied().filter(keep).collect();
            if set.is_empty() {
                me
            } else {
                set.push(me);
                self.new_set(set)
            }
        } else if keep(&old) {
            self.new_set(vec![old, me])
        } else {
            me
        };
        self.transition = Some((old, me, result));
        result
    }

    fn new_set(&mut self, set: Vec<Access>) -> Access {
        self.set_entries += set.len();
        self.sets.push(set);
        Access { clock: self.sets.len() as u32 - 1, tid: SHARED, tag: 0 }
    }

    /// Drops the read sets no byte refers to any more.
    fn collect_sets(&mut self) {
        let mut renumber: HashMap<u32, u32> = HashMap::new();
        let mut sets = Vec::new();
        for r in self.reads.iter_mut().filter(|r| r.tid == SHARED) {
            let next = sets.len() as u32;
            let id = *renumber.entry(r.clock).or_insert_with(|| {
                sets.push(std::mem::take(&mut self.sets[r.clock as usize]));
                next
            });
            r.clock = id;
        }
        self.set_entries = sets.iter().map(Vec::len).sum();
        self.sets = sets;
        self.transition = None;
    }

    fn report(&self, b: usize, me: Access, kind: Kind, loc: Loc, other: Access) -> String {
        let addr = self.base + b as u32;
        let t = me.tid as u32 - 1;
        let at = |l: Loc| format!("{}:{}", l.file(), l.line());
        let verb = if kind.is_write() { "writes" } else { "reads" };
        let this = match kind {
            Kind::Read | Kind::Write => format!("thread {t} (warp {}) {verb} shared {addr:#x} ({})", t / 32, at(loc)),
            Kind::CpAsync => {
                format!("the cp.async of thread {t} (warp {}) writes shared {addr:#x} ({})", t / 32, at(loc))
            }
            Kind::Bulk => format!("the bulk copy issued by thread {t} writes shared {addr:#x} ({})", at(loc)),
            Kind::Wgmma => format!("the wgmma of warpgroup {} reads shared {addr:#x} ({})", t / 128, at(loc)),
            Kind::AsyncRead => {
                format!("the asynchronous read issued by thread {t} reads shared {addr:#x} ({})", at(loc))
            }
        };
        let o = other.tid as u32 - 1;
        let that = match self.tags[other.tag as usize] {
            Some((l, k)) => match k {
                Kind::Read => format!("thread {o}'s read ({})", at(l)),
                Kind::Write => format!("thread {o}'s write ({})", at(l)),
                Kind::CpAsync => format!("thread {o}'s cp.async write ({})", at(l)),
                Kind::Bulk => format!("the write of thread {o}'s bulk copy ({})", at(l)),
                Kind::Wgmma => format!("the read of warpgroup {}'s wgmma ({})", o / 128, at(l)),
                Kind::AsyncRead => format!("the asynchronous read issued by thread {o} ({})", at(l)),
            },
            None => format!("an access of thread {o}"),
        };
        format!("{this} unordered with {that}: no barrier, mbarrier phase or collective orders the two (a data race)")
    }
}

// ---------------------------------------------------------------------------------------
// Hooks for the instruction models
// ---------------------------------------------------------------------------------------

impl Exec {
    /// A generic-proxy access (`ld.shared` / `st.shared`) of `[i, i + len)` (indices into
    /// shared memory) by this thread; fails the launch on a race.
    pub(crate) fn shared_access(mut self, i: usize, len: usize, kind: Kind) -> Exec {
        let (me, loc) = (self.me, self.loc);
        match access(&mut self.st, me, i, len, kind, loc) {
            Ok(()) => self,
            Err(message) => self.fail(ErrorKind::DataRace, message),
        }
    }

    /// An asynchronous write this thread issues into `[i, i + len)`: it may land any time
    /// from now on, so every earlier access of those bytes must be ordered before now.
    pub(crate) fn async_write_issue(mut self, i: usize, len: usize, kind: Kind) -> Exec {
        let (me, loc) = (self.me, self.loc);
        if let Some(race) = self.st.race.as_deref_mut() {
            let clock = race.clock(me);
            if let Err(message) = race.access(me, clock, i, len, kind, loc, false) {
                self.fail(ErrorKind::DataRace, message);
            }
        }
        self
    }
}

/// An access of `[i, i + len)` by `thread` now, at its current clock: checked, then
/// remembered.
pub(crate) fn access(st: &mut CtaState, thread: u32, i: usize, len: usize, kind: Kind, loc: Loc) -> Result<(), String> {
    let Some(race) = st.race.as_deref_mut() else { return Ok(()) };
    let clock = race.clock(thread);
    race.access(thread, clock, i, len, kind, loc, true)
}

/// A shared-memory write made by a warp collective on behalf of its members (the address
/// `tcgen05.alloc` stores), inside the collective's completion: recorded for `thread` (a
/// member) at the clock the collective just gave every member, so each member is ordered
/// after it.
pub(crate) fn collective_write(st: &mut CtaState, thread: u32, i: usize, len: usize, loc: Loc) -> Result<(), String> {
    let Some(race) = st.race.as_deref_mut() else { return Ok(()) };
    // `join_members` advanced each member's own clock past the joined one.
    let clock = race.clock(thread) - 1;
    race.access(thread, clock, i, len, Kind::Write, loc, true)
}

/// An asynchronous write into `[i, i + len)` completing now, attributed to `thread` (its
/// issuer) at its current clock.
pub(crate) fn async_write_complete(
    st: &mut CtaState,
    thread: u32,
    i: usize,
    len: usize,
    kind: Kind,
    instruction: &'static str,
    loc: Loc,
) -> Result<(), EmuError> {
    let Some(race) = st.race.as_deref_mut() else { return Ok(()) };
    let clock = race.clock(thread);
    race.access(thread, clock, i, len, kind, loc, true)
        .map_err(|m| EmuError::new(ErrorKind::DataRace, instruction, m).at(thread, loc))
}

/// A wgmma issued by `members` (just joined by the collective) reads `[i, i + len)`: every
/// write to it must be ordered before the issue. With `record`, at the `wait_group` that
/// completes it, the read is remembered at the clock every member knows.
pub(crate) fn wgmma_read(
    st: &mut CtaState,
    members: &[u32],
    i: usize,
    len: usize,
    loc: Loc,
    record: bool,
) -> Result<(), String> {
    let Some(race) = st.race.as_deref_mut() else { return Ok(()) };
    let first = members[0];
    // `join_members` advanced each member's own clock past the joined one.
    let clock = race.clock(first) - 1;
    race.access(first, clock, i, len, Kind::Wgmma, loc, record)
}

/// An asynchronous unit reads `[i, i + len)` on behalf of `thread` (for instance a
/// tcgen05.mma operand). At issue (`record` false) every write to it must be ordered
/// before now; at completion (`record` true) the read is remembered at the issuer's clock
/// then, so the arrival that reports the completion (`tcgen05.commit` through
/// [`mbarrier_signal`]) releases it, and a later write must be ordered after that.
pub(crate) fn async_read(
    st: &mut CtaState,
    thread: u32,
    i: usize,
    len: usize,
    loc: Loc,
    record: bool,
) -> Result<(), String> {
    let Some(race) = st.race.as_deref_mut() else { return Ok(()) };
    let clock = race.clock(thread);
    race.access(thread, clock, i, len, Kind::AsyncRead, loc, record)
}

/// Runs `f` on the mbarrier at `addr` (which must exist) as one operation that may
/// complete its current phase. With `release_by`, the operation is an arrive-on (or a
/// `complete_tx`) performed by that thread or by an asynchronous unit on its behalf
/// (`cp.async.mbarrier.arrive`, a bulk copy, `tcgen05.commit`): that thread's memory
/// accesses so far are released into the phase. When the phase completes, every thread
/// blocked waiting for it acquires the phase's releases.
///
/// Every arrival on an mbarrier goes through here, so the phases stay consistent.
pub(crate) fn mbarrier_signal<T>(
    st: &mut CtaState,
    addr: u32,
    release_by: Option<u32>,
    f: impl FnOnce(&mut Mbarrier) -> Result<T, String>,
) -> Result<T, String> {
    let Some(m) = st.mbarriers.get_mut(&addr) else {
        return Err(format!("no mbarrier was initialised at shared address {addr:#x}"));
    };
    let before = m.phase;
    if let Some(race) = st.race.as_deref_mut() {
        race.phases(addr).sync(before);
        if let Some(t) = release_by {
            let mut current = std::mem::take(&mut race.phases(addr).current);
            race.release(t, &mut current);
            race.phases(addr).current = current;
        }
    }
    let out = f(m)?;
    if let Some(race) = st.race.as_deref_mut()
        && race.phases(addr).sync(m.phase)
    {
        let completed = race.phases(addr).completed.clone();
        for (t, state) in st.threads.iter().enumerate() {
            if let ThreadState::Blocked { wait: Wait::Mbarrier { addr: a, parity }, .. } = *state
                && a == addr
                && m.phase_completed(parity)
            {
                race.acquire(t as u32, &completed);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{Kind, Race};

    fn loc() -> crate::report::Loc {
        std::panic::Location::caller()
    }

    /// Concurrent reads form a set; collecting unreferenced sets keeps the live ones
    /// intact, and a write unordered with any read of a set is still reported.
    #[test]
    fn read_sets_survive_collection() {
        let mut r = Race::new(4, 0x400, 16);
        for t in 0..3 {
            let c = r.clock(t);
            r.access(t, c, 0, 16, Kind::Read, loc(), true).unwrap();
        }
        // Bytes 0..8 are overwritten by thread 3 after it acquires everything; 8..16 keep
        // the set of three reads.
        let all: Vec<u32> = (0..3).flat_map(|t| r.vc(t).to_vec()).collect();
        for t in 0..3 {
            let clock = all[t * 4..t * 4 + 4].to_vec();
            r.acquire(3, &clock);
        }
        let c = r.clock(3);
        r.access(3, c, 0, 8, Kind::Write, loc(), true).unwrap();
        let garbage = r.sets.len();
        assert!(garbage >= 2, "two concurrent reads make a set");
        r.collect_sets();
        assert_eq!(r.sets.len(), 1, "only the set bytes 8..16 still refer to survives");
        // Thread 0 knows nothing of threads 1 and 2: its write races with their reads.
        let c = r.clock(0);
        let e = r.access(0, c, 8, 8, Kind::Write, loc(), true).unwrap_err();
        assert!(e.contains("thread 0 (warp 0) writes shared 0x408") && e.contains("'s read"), "{e}");
        // Thread 3 acquired all three reads: its write of them is ordered.
        let c = r.clock(3);
        r.access(3, c, 8, 8, Kind::Write, loc(), true).unwrap();
    }
}
