//! Launching a kernel under emulation: the grid's CTAs run on a few worker threads, and
//! each CTA's threads run as host threads under the CTA's baton scheduler.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};

use crate::cta::Cta;
use crate::faults::Site;
use crate::memory::GlobalMemory;
use crate::ops;
use crate::report::{EmuError, ErrorKind};
use crate::sched::Abort;

/// Shared-window address where dynamic shared memory starts: sm_90/sm_100 reserve the
/// first 1 KiB of each CTA's shared window for the system, so a kernel without static
/// shared variables sees `DYN_SMEM` at 0x400 (as measured on the H100).
pub const DYNAMIC_SMEM_BASE: u32 = 0x400;
/// Largest dynamic shared memory per CTA (H100 and B200: 227 KiB).
pub const MAX_DYNAMIC_SMEM: u32 = 227 * 1024;
/// Largest CTA.
pub const MAX_THREADS_PER_CTA: u32 = 1024;

/// Grid, CTA shape and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem: u32,
}

/// How the emulator runs a launch.
#[derive(Clone, Debug)]
pub struct Options {
    /// CTAs run at the same time (each on its own set of host threads).
    pub parallel_ctas: usize,
    /// Host stack per emulated thread.
    pub stack_bytes: usize,
    /// Report data races on shared memory (happens-before tracking; on by default).
    pub detect_races: bool,
    /// Seeded random schedules: when set, each CTA's threads are preempted at random
    /// instruction boundaries and woken in random order, reproducibly for a given seed.
    /// `None` (the default) is the plain round-robin baton.
    pub seed: Option<u64>,
    /// Fault injection: every execution of this droppable instruction site becomes a
    /// no-op (see [`crate::faults`]). `None` runs the kernel as written.
    pub drop: Option<Site>,
    /// The order in which each CTA's threads take turns.
    pub schedule: Schedule,
}

/// Which thread runs next. One thread of a CTA runs at a time and keeps running until it
/// blocks (or exits); then the schedule picks the next runnable thread. A correct kernel
/// gives the same result under every schedule, but each one hides some ordering bugs:
/// under [`RoundRobin`](Schedule::RoundRobin), thread 0 starts and the low-numbered
/// threads (often the producers) run far ahead, so a consumer that forgot to wait finds
/// the data already there. [`HighestFirst`](Schedule::HighestFirst) runs high-numbered
/// threads first whenever they can run, so that consumer reads before the producer
/// wrote, and a thread that uses what thread 0 sets up without a barrier in between
/// finds it missing. (A thread that yields after a futile `test_wait` poll passes the
/// baton round-robin under both, so pollers cannot starve the others.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// Thread 0 starts; the baton passes to the next higher index (wrapping around).
    #[default]
    RoundRobin,
    /// The last thread starts; the baton passes to the highest-numbered runnable thread.
    HighestFirst,
}

impl Schedule {
    pub const ALL: [Schedule; 2] = [Schedule::RoundRobin, Schedule::HighestFirst];
}

impl Default for Options {
    fn default() -> Options {
        Options {
            parallel_ctas: std::thread::available_parallelism().map_or(1, |n| n.get()),
            stack_bytes: 2 << 20,
            detect_races: true,
            seed: None,
            drop: None,
            schedule: Schedule::RoundRobin,
        }
    }
}

/// What a launch executed.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub ctas: u64,
    pub threads: u64,
    /// Executed instructions by mnemonic (only those that reach the emulator: loads,
    /// stores, synchronisation, async units, conversions; not plain integer arithmetic).
    pub instructions: BTreeMap<&'static str, u64>,
    /// Executions of [droppable](crate::faults::DROPPABLE) instructions by call site: the
    /// sites a fault-injection run may drop.
    pub sites: BTreeMap<Site, u64>,
}

/// Runs `kernel` once per thread of every CTA of `config`, with `global` as device memory.
/// Returns the first rule violation, deadlock or panic, if any.
pub fn launch<F: Fn() + Sync>(global: &GlobalMemory, config: LaunchConfig, kernel: F) -> Result<Stats, EmuError> {
    launch_with(global, config, &Options::default(), kernel)
}

/// [`launch`] with explicit [`Options`].
pub fn launch_with<F: Fn() + Sync>(
    global: &GlobalMemory,
    config: LaunchConfig,
    options: &Options,
    kernel: F,
) -> Result<Stats, EmuError> {
    let threads: u64 = config.block.iter().map(|&d| d as u64).product();
    let ctas: u64 = config.grid.iter().map(|&d| d as u64).product();
    let invalid = |m: String| Err(EmuError::new(ErrorKind::Launch, "launch", m));
    if threads == 0 || ctas == 0 {
        return invalid(format!("empty launch: grid {:?}, block {:?}", config.grid, config.block));
    }
    if threads > MAX_THREADS_PER_CTA as u64 {
        return invalid(format!("{threads} threads per CTA exceed the limit of {MAX_THREADS_PER_CTA}"));
    }
    if config.dynamic_smem > MAX_DYNAMIC_SMEM {
        return invalid(format!(
            "{} bytes of dynamic shared memory exceed the limit of {MAX_DYNAMIC_SMEM}",
            config.dynamic_smem
        ));
    }
    let next = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let result: Mutex<(Stats, Option<(u64, EmuError)>)> = Mutex::new((Stats::default(), None));
    let workers = options.parallel_ctas.clamp(1, ctas.min(64) as usize);
    let kernel: &(dyn Fn() + Sync) = &kernel;
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let pool = ThreadPool::new(s, threads as u32, options.stack_bytes, kernel);
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= ctas || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let [gx, gy, _] = config.grid.map(|d| d as u64);
                    let ctaid = [(index % gx) as u32, ((index / gx) % gy) as u32, (index / (gx * gy)) as u32];
                    let outcome = run_cta(global, &config, options, index, ctaid, &pool);
                    let mut r = result.lock().unwrap_or_else(|e| e.into_inner());
                    match outcome {
                        Ok((counts, sites)) => {
                            r.0.ctas += 1;
                            r.0.threads += threads;
                            for (k, v) in counts {
                                *r.0.instructions.entry(k).or_insert(0) += v;
                            }
                            for (k, v) in sites {
                                *r.0.sites.entry(k).or_insert(0) += v;
                            }
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            // Report the failure of the lowest CTA, for reproducible messages.
                            if r.1.as_ref().is_none_or(|(i, _)| index < *i) {
                                r.1 = Some((index, e));
                            }
                        }
                    }
                }
            });
        }
    });
    let (stats, error) = result.into_inner().unwrap_or_else(|e| e.into_inner());
    match error {
        Some((_, e)) => Err(e),
        None => Ok(stats),
    }
}

/// Host threads that run one CTA's emulated threads, reused from CTA to CTA (creating
/// a host thread costs more than most emulated threads do).
struct ThreadPool {
    jobs: Vec<mpsc::Sender<Job>>,
    done: mpsc::Receiver<ops::Executed>,
}

/// "Run emulated thread `me` of this CTA": a pointer, because the CTA lives on the
/// worker's stack and the pool thread borrows it only until it reports done.
struct Job {
    cta: *const Cta<'static>,
    me: u32,
}

// SAFETY: the worker keeps the CTA alive until every job on it has reported done.
unsafe impl Send for Job {}

impl ThreadPool {
    /// Starts `threads` host threads in the launch's scope; each exits when the pool (its
    /// job channel) is dropped, and the scope joins them before the launch returns.
    fn new<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        threads: u32,
        stack_bytes: usize,
        kernel: &'env (dyn Fn() + Sync),
    ) -> ThreadPool {
        let (done_tx, done) = mpsc::channel();
        let jobs = (0..threads)
            .map(|t| {
                let (tx, rx) = mpsc::channel::<Job>();
                let done_tx = done_tx.clone();
                std::thread::Builder::new()
                    .name(format!("emu-thread-{t}"))
                    .stack_size(stack_bytes)
                    .spawn_scoped(scope, move || {
                        while let Ok(job) = rx.recv() {
                            // SAFETY: see `Job`.
                            let cta = unsafe { &*job.cta };
                            let counts = run_thread(cta, job.me, kernel);
                            if done_tx.send(counts).is_err() {
                                break;
                            }
                        }
                    })
                    .expect("cannot start an emulator host thread");
                tx
            })
            .collect();
        ThreadPool { jobs, done }
    }
}

fn run_cta(
    global: &GlobalMemory,
    config: &LaunchConfig,
    options: &Options,
    index: u64,
    ctaid: [u32; 3],
    pool: &ThreadPool,
) -> Result<ops::Executed, EmuError> {
    let mut cta = Cta::new(global, ctaid, config.grid, config.block, DYNAMIC_SMEM_BASE, config.dynamic_smem);
    cta.drop = options.drop;
    cta.instrument(options.detect_races, crate::sched::Sched::new(options.seed, index));
    cta.schedule = options.schedule;
    if options.schedule == Schedule::HighestFirst {
        cta.lock().baton = cta.threads() - 1;
    }
    let ptr: *const Cta<'static> = (&cta as *const Cta<'_>).cast();
    for (me, job) in pool.jobs.iter().enumerate() {
        job.send(Job { cta: ptr, me: me as u32 }).expect("emulator host thread alive");
    }
    let mut totals: ops::Executed = Default::default();
    for _ in 0..pool.jobs.len() {
        let (counts, sites) = pool.done.recv().expect("emulator host thread alive");
        for (k, v) in counts {
            *totals.0.entry(k).or_insert(0) += v;
        }
        for (k, v) in sites {
            *totals.1.entry(k).or_insert(0) += v;
        }
    }
    let mut st = cta.lock();
    if let Some(mut e) = st.aborted.take() {
        e.cta = ctaid;
        return Err(e);
    }
    let end_error = |m: String, kind| {
        let mut e = EmuError::new(kind, "exit", m);
        e.cta = ctaid;
        Err(e)
    };
    if let Err(mut e) = crate::units::end_of_cta(&mut st) {
        e.cta = ctaid;
        return Err(e);
    }
    for (addr, m) in &st.mbarriers {
        if m.pending != m.count || m.tx != 0 {
            return end_error(
                format!(
                    "mbarrier {addr:#x} (initialised at {}:{}) ended mid-phase: {} of {} arrivals missing, tx-count {} (mismatched arrival counts or transaction bytes)",
                    m.init_loc.file(),
                    m.init_loc.line(),
                    m.pending,
                    m.count,
                    m.tx
                ),
                ErrorKind::Mbarrier,
            );
        }
    }
    drop(st);
    Ok(totals)
}

/// Runs emulated thread `me` of `cta` on this host thread; returns what it executed.
fn run_thread(cta: &Cta<'_>, me: u32, kernel: &(dyn Fn() + Sync)) -> ops::Executed {
    let body = || {
        drop(cta.wait_for_baton(me, cta.lock()));
        ops::enter(cta, me);
        kernel();
        let counts = ops::leave();
        drop(cta.exit(me, cta.lock()));
        counts
    };
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(counts) => counts,
        Err(payload) => {
            let counts = ops::leave();
            if !payload.is::<Abort>() {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "(non-string panic payload)".into());
                let mut error =
                    EmuError::new(ErrorKind::Panic, "(kernel code)", format!("the kernel panicked: {message}"));
                error.thread = Some(me);
                let st = cta.lock();
                let _ = catch_unwind(AssertUnwindSafe(|| cta.abort(st, error)));
            }
            counts
        }
    }
}
