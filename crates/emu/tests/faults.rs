//! Fault injection (`emu::faults`) and thread schedules (`emu::Schedule`) on a tiny
//! producer/consumer kernel: which sites a launch records, what dropping each one does,
//! and why one schedule is not enough to see every missing synchronisation.

use std::sync::Mutex;

use emu::faults::{DROPPABLE, is_droppable, looks_like_sync};
use emu::ops::{barrier, fence, mbarrier, memory, special, warp};
use emu::{ErrorKind, GlobalMemory, LaunchConfig, Options, SHARED_INITIAL_BYTE, Schedule, Site, Stats};

/// Source lines of the tiny kernel's synchronisation, recorded as it runs.
#[derive(Default)]
struct Lines {
    init_fence: Mutex<u32>,
    bar: Mutex<u32>,
    arrive: Mutex<u32>,
    wait: Mutex<u32>,
}

/// The line after the caller's.
#[track_caller]
fn next_line() -> u32 {
    std::panic::Location::caller().line() + 1
}

/// Two warps. Thread 0 initialises an mbarrier (count 1), the CTA synchronises, then
/// each warp dispatches on a warp-uniform role (a shuffle, as the project's kernels do):
/// thread 0 stores 42 to shared memory and arrives; thread 32 waits for the phase, loads
/// the value and writes it to `out`.
fn producer_consumer(lines: &Lines, out: u64) {
    let tid = special::tid()[0];
    let base = special::dynamic_smem_base();
    let (bar, data) = (base, base + 16);
    if tid == 0 {
        mbarrier::init(bar, 1);
        *lines.init_fence.lock().unwrap() = next_line();
        fence::mbarrier_init();
    }
    *lines.bar.lock().unwrap() = next_line();
    barrier::sync_all(0);
    let warp = warp::shfl_sync_idx(tid / 32, 0);
    if warp == 0 && tid == 0 {
        memory::st_shared::<u32>(data, 42);
        *lines.arrive.lock().unwrap() = next_line();
        mbarrier::arrive(bar);
    } else if warp == 1 && tid == 32 {
        *lines.wait.lock().unwrap() = next_line();
        while !mbarrier::try_wait_parity(bar, 0) {}
        let v = memory::ld_shared::<u32>(data);
        memory::st_global(out, v);
    }
}

/// Runs the kernel with `drop` dropped under `schedule`: its stats and the value thread
/// 32 read, or the report. Race detection is off, to show what the schedule alone does
/// (`run_checked` turns it on).
fn run(lines: &Lines, drop: Option<Site>, schedule: Schedule) -> Result<(Stats, u32), emu::EmuError> {
    run_with(lines, drop, schedule, false)
}

fn run_checked(lines: &Lines, drop: Option<Site>, schedule: Schedule) -> Result<(Stats, u32), emu::EmuError> {
    run_with(lines, drop, schedule, true)
}

fn run_with(
    lines: &Lines,
    drop: Option<Site>,
    schedule: Schedule,
    detect_races: bool,
) -> Result<(Stats, u32), emu::EmuError> {
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 4);
    let config = LaunchConfig { grid: [1, 1, 1], block: [64, 1, 1], dynamic_smem: 64 };
    let options = Options { drop, schedule, detect_races, ..Options::default() };
    let stats = emu::launch_with(&gm, config, &options, || producer_consumer(lines, out))?;
    let mut bytes = [0u8; 4];
    gm.read(out, &mut bytes).unwrap();
    Ok((stats, u32::from_le_bytes(bytes)))
}

/// The site of `instruction` on `line` of this file among a launch's sites.
fn site(stats: &Stats, instruction: &str, line: u32) -> Site {
    *stats
        .sites
        .keys()
        .find(|s| s.instruction == instruction && s.loc.line() == line && s.loc.file() == file!())
        .unwrap_or_else(|| panic!("no site `{instruction}` at line {line} in {:?}", stats.sites))
}

const STALE: u32 = u32::from_le_bytes([SHARED_INITIAL_BYTE; 4]);

#[test]
fn a_launch_records_each_droppable_site_it_executed() {
    let lines = Lines::default();
    for schedule in Schedule::ALL {
        assert_eq!(run_checked(&lines, None, schedule).unwrap().1, 42, "{schedule:?}: correct, no race");
        let (stats, value) = run(&lines, None, schedule).unwrap();
        assert_eq!(value, 42, "{schedule:?}");
        let l = |m: &Mutex<u32>| *m.lock().unwrap();
        let sites: Vec<(&str, u32, u64)> = stats.sites.iter().map(|(s, &n)| (s.instruction, s.loc.line(), n)).collect();
        assert_eq!(
            sites,
            [
                ("fence.mbarrier_init.release.cluster", l(&lines.init_fence), 1),
                ("bar.sync", l(&lines.bar), 64),
                ("mbarrier.arrive.shared::cta.b64", l(&lines.arrive), 1),
                ("mbarrier.try_wait.parity.shared::cta.b64", l(&lines.wait), 1),
            ],
            "{schedule:?}: only droppable instructions, by site, with their executions"
        );
        assert!(stats.instructions.contains_key("st.shared") && stats.instructions.contains_key("shfl.sync.idx.b32"));
    }
}

/// Dropping the consumer's wait: under round-robin the producer (thread 0) has run long
/// before thread 32 reads, so the missing wait is invisible; highest-first runs thread
/// 32 as soon as the shuffle lets it, and it reads the shared memory's initial bytes.
#[test]
fn a_dropped_wait_needs_the_highest_first_schedule() {
    let lines = Lines::default();
    let (stats, _) = run(&lines, None, Schedule::RoundRobin).unwrap();
    let wait = site(&stats, "mbarrier.try_wait.parity.shared::cta.b64", *lines.wait.lock().unwrap());
    assert_eq!(run(&lines, Some(wait), Schedule::RoundRobin).unwrap().1, 42, "round-robin hides it");
    assert_eq!(run(&lines, Some(wait), Schedule::HighestFirst).unwrap().1, STALE, "highest-first reads too early");
    // The race detector sees the unordered read under any schedule.
    for schedule in Schedule::ALL {
        let e = run_checked(&lines, Some(wait), schedule).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DataRace, "{e}");
    }
}

/// Dropping the CTA barrier after the init: round-robin runs thread 0 (the initialiser)
/// first, so the barrier seems unnecessary; under highest-first thread 32 waits on the
/// mbarrier before it exists.
#[test]
fn a_dropped_init_barrier_needs_the_highest_first_schedule() {
    let lines = Lines::default();
    let (stats, _) = run(&lines, None, Schedule::RoundRobin).unwrap();
    let bar = site(&stats, "bar.sync", *lines.bar.lock().unwrap());
    assert_eq!(run(&lines, Some(bar), Schedule::RoundRobin).unwrap().1, 42, "round-robin hides it");
    let e = run(&lines, Some(bar), Schedule::HighestFirst).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Mbarrier, "{e}");
    assert!(e.message.contains("no mbarrier was initialised"), "{e}");
    assert_eq!((e.thread, e.location.map(|l| l.line())), (Some(32), Some(*lines.wait.lock().unwrap())), "{e}");
}

/// Dropping the only arrival: the consumer waits forever, under every schedule.
#[test]
fn a_dropped_arrive_is_a_deadlock() {
    let lines = Lines::default();
    let (stats, _) = run(&lines, None, Schedule::RoundRobin).unwrap();
    let arrive = site(&stats, "mbarrier.arrive.shared::cta.b64", *lines.arrive.lock().unwrap());
    for schedule in Schedule::ALL {
        let e = run(&lines, Some(arrive), schedule).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Deadlock, "{schedule:?}: {e}");
        assert!(e.message.contains("mbarrier.try_wait"), "{e}");
    }
}

/// Dropping the init fence changes nothing here: no async-proxy operation signals the
/// barrier (the PTX rule the emulator checks is the bulk copy's `complete_tx`).
#[test]
fn a_dropped_init_fence_matters_only_to_the_async_proxy() {
    let lines = Lines::default();
    let (stats, _) = run(&lines, None, Schedule::RoundRobin).unwrap();
    let fence = site(&stats, "fence.mbarrier_init.release.cluster", *lines.init_fence.lock().unwrap());
    for schedule in Schedule::ALL {
        assert_eq!(run(&lines, Some(fence), schedule).unwrap().1, 42);
    }
}

/// A site is dropped only where it is: the same instruction elsewhere still runs. Here
/// the two warps meet at barrier 0 from two different lines; dropping one line leaves the
/// other warp waiting there alone.
#[test]
fn a_drop_is_one_site_only() {
    let gm = GlobalMemory::new();
    let config = LaunchConfig { grid: [1, 1, 1], block: [64, 1, 1], dynamic_smem: 0 };
    let line = Mutex::new([0u32; 2]);
    let kernel = || {
        let warp = special::tid()[0] / 32;
        if warp == 0 {
            line.lock().unwrap()[0] = next_line();
            barrier::sync_all(0);
        } else {
            line.lock().unwrap()[1] = next_line();
            barrier::sync_all(0);
        }
    };
    let stats = emu::launch(&gm, config, kernel).unwrap();
    let lines = *line.lock().unwrap();
    let sites: Vec<Site> = lines.iter().map(|&l| site(&stats, "bar.sync", l)).collect();
    for (dropped, waiting) in [(0, 1), (1, 0)] {
        let options = Options { drop: Some(sites[dropped]), ..Options::default() };
        let e = emu::launch_with(&gm, config, &options, kernel).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Deadlock, "{e}");
        let at = format!("wait at `bar.sync` barrier 0 (32 of 64 threads arrived) at {}:{}", file!(), lines[waiting]);
        assert!(e.message.contains(&at), "{e}");
    }
}

/// The list names every synchronisation instruction the emulator models, and nothing
/// else; the host's fault campaign relies on `looks_like_sync` to find omissions.
#[test]
fn the_droppable_list_is_synchronisation() {
    for i in DROPPABLE {
        assert!(looks_like_sync(i), "{i} does not look like synchronisation");
        assert!(is_droppable(i));
    }
    for i in ["st.shared", "ld.shared", "shfl.sync.idx.b32", "elect.sync", "mbarrier.init.shared::cta.b64"] {
        assert!(!looks_like_sync(i) && !is_droppable(i), "{i}");
    }
    assert!(looks_like_sync("tcgen05.some_new_wait"), "a new wait would be flagged");
}

// ---------------------------------------------------------------------------------------
// Rules added because a fault campaign found them missing
// ---------------------------------------------------------------------------------------

/// A `tcgen05.commit` arrives from the tensor core (async proxy), so the mbarrier's init
/// must have been published to the async proxy first, as for a bulk copy's complete_tx.
/// (Found by dropping sm100's `fence.mbarrier_init`; there, producer thread 0's later
/// `fence.proxy.async` publishes the inits in time, so that drop is legitimately missed.)
#[test]
fn a_tcgen05_commit_on_an_unfenced_mbarrier_init() {
    for fenced in [false, true] {
        let gm = GlobalMemory::new();
        let config = LaunchConfig { grid: [1, 1, 1], block: [32, 1, 1], dynamic_smem: 64 };
        let init_line = Mutex::new(0);
        let kernel = || {
            let bar = special::dynamic_smem_base();
            if special::tid()[0] == 0 {
                *init_line.lock().unwrap() = next_line();
                mbarrier::init(bar, 1);
                if fenced {
                    fence::mbarrier_init();
                }
                // No tcgen05 operation pending: the commit arrives at once.
                emu::ops::tcgen05::commit(bar);
                while !mbarrier::try_wait_parity(bar, 0) {}
            }
        };
        match emu::launch(&gm, config, kernel) {
            Ok(_) => assert!(fenced, "the unfenced init went unnoticed"),
            Err(e) => {
                assert!(!fenced, "{e}");
                assert_eq!(e.kind, ErrorKind::Mbarrier, "{e}");
                let at = format!("whose init ({}:{}) was never fenced", file!(), init_line.lock().unwrap());
                assert!(e.message.contains(&at), "{e}");
            }
        }
    }
}
