//! One CTA under emulation: its identity and all its on-chip state ([`CtaState`], behind
//! one lock): shared memory, named barriers, mbarriers, the collectives being assembled,
//! the asynchronous units (`crate::units`), and the scheduler's view of its threads
//! (`crate::sched`, which owns the baton and the waits).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::memory::{GlobalMemory, SharedMemory};
use crate::report::{EmuError, Loc};
use crate::sched::ThreadState;
use crate::units::Units;

/// Threads per warp.
pub const WARP: u32 = 32;
/// Threads per warpgroup (four consecutive warps).
pub const WARPGROUP: u32 = 128;

/// The threads a collective instruction joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Scope {
    /// The lanes `mask` of warp `warp` (its index in the CTA).
    Warp { warp: u32, mask: u32 },
    /// A warpgroup (its index in the CTA).
    Warpgroup(u32),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Scope::Warp { warp, mask: u32::MAX } => write!(f, "warp {warp}"),
            Scope::Warp { warp, mask } => write!(f, "lanes {mask:#010x} of warp {warp}"),
            Scope::Warpgroup(wg) => write!(f, "warpgroup {wg}"),
        }
    }
}

/// A collective instruction being assembled from its threads' arrivals.
pub(crate) struct Rendezvous {
    pub instruction: &'static str,
    pub loc: Loc,
    /// Linear thread indices that must arrive.
    pub members: Vec<u32>,
    pub arrived: Vec<bool>,
    pub count: usize,
    /// What each member brought, typed by the instruction: a `Vec<Option<In>>` of the
    /// collective's input type (the scheduler only stores it).
    pub inputs: Box<dyn std::any::Any + Send>,
    /// The last completed round's results, a `Vec<Out>` of its output type.
    pub outputs: Box<dyn std::any::Any + Send>,
    pub generation: u64,
}

/// A named barrier (`bar.sync` / `bar.arrive`, ids 0..16).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NamedBarrier {
    pub expected: u32,
    pub arrived: u32,
    pub generation: u64,
}

/// Largest tx-count magnitude (PTX ISA: the range is -(2^20 - 1) ..= 2^20 - 1).
pub const TX_LIMIT: i64 = (1 << 20) - 1;

/// The state of one mbarrier object (PTX ISA 9.7.13.15; the instructions on it are in
/// `ops::mbarrier`).
#[derive(Clone, Debug)]
pub(crate) struct Mbarrier {
    pub count: u32,
    pub pending: u32,
    pub tx: i64,
    pub phase: u64,
    pub initialised_by: u32,
    pub init_fenced: bool,
    pub init_loc: Loc,
}

impl Mbarrier {
    /// Whether the phase with this parity has completed (what `try_wait.parity` asks).
    pub fn phase_completed(&self, parity: u32) -> bool {
        (self.phase & 1) as u32 != parity
    }

    fn maybe_complete(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.phase += 1;
            self.pending = self.count;
        }
    }

    /// One arrival (or `n` for a counted arrive).
    pub fn arrive(&mut self, n: u32) -> Result<(), String> {
        if n > self.pending {
            return Err(format!(
                "{n} arrival(s) on an mbarrier with only {} of its {} arrivals left in phase {} (more arrivals than the init count)",
                self.pending, self.count, self.phase
            ));
        }
        self.pending -= n;
        self.maybe_complete();
        Ok(())
    }

    pub fn expect_tx(&mut self, bytes: u32) -> Result<(), String> {
        self.tx += bytes as i64;
        if self.tx > TX_LIMIT {
            return Err(format!("tx-count {} exceeds the mbarrier's limit {TX_LIMIT}", self.tx));
        }
        // A copy may have completed its bytes before they were expected.
        self.maybe_complete();
        Ok(())
    }

    /// A copy delivered `bytes` (may precede the matching expect_tx).
    pub fn complete_tx(&mut self, bytes: u32) -> Result<(), String> {
        self.tx -= bytes as i64;
        if self.tx < -TX_LIMIT {
            return Err(format!("tx-count {} is below the mbarrier's limit -{TX_LIMIT}", self.tx));
        }
        self.maybe_complete();
        Ok(())
    }

    /// One line for deadlock reports: what the current phase still needs, with what the
    /// asynchronous units still owe it (`in_flight`, one piece per unit).
    pub fn describe(&self, in_flight: &[String]) -> String {
        let owed = match in_flight {
            [] => "nothing".to_string(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        };
        format!(
            "phase {}: {} of {} arrivals missing, tx-count {} with {owed} in flight",
            self.phase, self.pending, self.count, self.tx
        )
    }
}

/// Named barriers per CTA.
pub const NAMED_BARRIERS: u32 = 16;

/// Everything on chip that belongs to one CTA, behind the CTA lock.
pub(crate) struct CtaState {
    pub baton: u32,
    pub threads: Vec<ThreadState>,
    pub aborted: Option<EmuError>,
    pub smem: SharedMemory,
    pub barriers: [NamedBarrier; NAMED_BARRIERS as usize],
    pub mbarriers: BTreeMap<u32, Mbarrier>,
    pub rendezvous: HashMap<Scope, Rendezvous>,
    /// The state of every asynchronous unit (see `crate::units`).
    pub units: Units,
    /// Monotonic counter that orders asynchronous work for lazy completion.
    pub async_sequence: u64,
    /// False polls since any thread last executed another instruction.
    pub futile_polls: u64,
    /// Happens-before tracking of shared memory (`None` when race detection is off).
    pub race: Option<Box<crate::race::Race>>,
    /// The seeded schedule's randomness.
    pub sched: crate::sched::Sched,
}

/// A CTA: its identity, its state and one wake-up signal per thread.
pub(crate) struct Cta<'g> {
    pub global: &'g GlobalMemory,
    pub ctaid: [u32; 3],
    pub nctaid: [u32; 3],
    pub ntid: [u32; 3],
    pub state: Mutex<CtaState>,
    pub wake: Vec<Condvar>,
    /// The instruction site this launch drops (fault injection, see `crate::faults`).
    pub drop: Option<crate::faults::Site>,
    /// The order in which threads take the baton.
    pub schedule: crate::launch::Schedule,
}

impl<'g> Cta<'g> {
    pub fn new(
        global: &'g GlobalMemory,
        ctaid: [u32; 3],
        nctaid: [u32; 3],
        ntid: [u32; 3],
        smem_base: u32,
        smem_len: u32,
    ) -> Cta<'g> {
        let threads = (ntid[0] * ntid[1] * ntid[2]) as usize;
        Cta {
            global,
            ctaid,
            nctaid,
            ntid,
            state: Mutex::new(CtaState {
                baton: 0,
                threads: vec![ThreadState::Runnable; threads],
                aborted: None,
                smem: SharedMemory::new(smem_base, smem_len, threads),
                barriers: [NamedBarrier::default(); NAMED_BARRIERS as usize],
                mbarriers: BTreeMap::new(),
                rendezvous: HashMap::new(),
                units: Units::new(threads),
                async_sequence: 0,
                futile_polls: 0,
                race: None,
                sched: crate::sched::Sched::new(None, 0),
            }),
            wake: (0..threads).map(|_| Condvar::new()).collect(),
            drop: None,
            schedule: crate::launch::Schedule::RoundRobin,
        }
    }

    pub fn threads(&self) -> u32 {
        self.ntid[0] * self.ntid[1] * self.ntid[2]
    }

    pub fn lock(&self) -> MutexGuard<'_, CtaState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl CtaState {
    pub fn next_sequence(&mut self) -> u64 {
        self.async_sequence += 1;
        self.async_sequence
    }
}
