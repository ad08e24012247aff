//! The data-race detector (happens-before on shared memory) and the seeded schedules.
//!
//! Each racy kernel is run under the default schedule and a handful of seeds: a race must
//! be reported whichever access the schedule happens to run first, with both source lines.
//! Each correctly synchronised twin must pass under every schedule.

use emu::ops::{barrier, bulk, cp_async, fence, mbarrier, memory, special, warp, wgmma};
use emu::{EmuError, ErrorKind, GlobalMemory, LaunchConfig, Options, Stats};

mod common;
use common::*;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// The default round-robin schedule, then eight seeded ones.
const SCHEDULES: [Option<u64>; 9] = [None, Some(0), Some(1), Some(2), Some(3), Some(4), Some(5), Some(6), Some(7)];

/// Launches one CTA under the schedule `seed` (race detection on, as by default).
fn run(
    gm: &GlobalMemory,
    threads: u32,
    smem: u32,
    seed: Option<u64>,
    kernel: impl Fn() + Sync,
) -> Result<Stats, EmuError> {
    let options = Options { seed, ..Options::default() };
    emu::launch_with(gm, one_cta(threads, smem), &options, kernel)
}

/// The report of a launch that must fail.
#[track_caller]
fn failure(result: Result<Stats, EmuError>, seed: Option<u64>) -> EmuError {
    match result {
        Ok(_) => panic!("schedule {seed:?}: the launch succeeded, but a report was expected"),
        Err(e) => e,
    }
}

/// Asserts a data-race report whose message names every one of `needles`.
#[track_caller]
fn expect_race(e: &EmuError, seed: Option<u64>, needles: &[&str]) {
    assert_eq!(e.kind, ErrorKind::DataRace, "schedule {seed:?}: wrong kind of report: {e}");
    for needle in needles {
        assert!(e.message.contains(needle), "schedule {seed:?}: the message lacks {needle:?}: {e}");
    }
}

/// Thread 0 initialises an mbarrier of `count` at `bar` (fenced for the async proxy),
/// then the whole CTA synchronises.
fn init_mbarrier(bar: u32, count: u32) {
    if tid() == 0 {
        mbarrier::init(bar, count);
        fence::mbarrier_init();
    }
    barrier::sync_all(0);
}

fn read_u32(gm: &GlobalMemory, addr: u64) -> u32 {
    let mut b = [0; 4];
    gm.read(addr, &mut b).unwrap();
    u32::from_le_bytes(b)
}

// ---------------------------------------------------------------------------------------
// Generic loads and stores; named barriers
// ---------------------------------------------------------------------------------------

/// Warp 0 stores a word that warp 1 loads, nothing in between: a race, whichever runs
/// first, named with both lines.
#[test]
fn store_and_load_in_different_warps_without_a_barrier() {
    let (store, load) = (Line::default(), Line::default());
    for seed in SCHEDULES {
        let e = failure(
            run(&GlobalMemory::new(), 64, 64, seed, || {
                if tid() == 0 {
                    store.next();
                    memory::st_shared::<u32>(smem() + 16, 7);
                }
                if tid() == 32 {
                    load.next();
                    let _ = memory::ld_shared::<u32>(smem() + 16);
                }
            }),
            seed,
        );
        expect_race(&e, seed, &[&store.at(), &load.at(), "0x410", "thread 0", "thread 32", "write", "read"]);
        if seed.is_none() {
            // Round robin runs thread 0 first: the load is the second access, and blamed.
            assert_eq!(e.thread, Some(32), "{e}");
            assert!(e.message.starts_with("thread 32 (warp 1) reads shared 0x410"), "{e}");
            assert_eq!(e.location.map(|l| format!("{}:{}", l.file(), l.line())), Some(load.at()));
        }
    }
}

/// The same with `bar.sync` between: ordered, and the load sees the store.
#[test]
fn store_and_load_ordered_by_bar_sync() {
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 4);
    for seed in SCHEDULES {
        run(&gm, 64, 64, seed, || {
            if tid() == 0 {
                memory::st_shared::<u32>(smem() + 16, 7);
            }
            barrier::sync_all(0);
            if tid() == 32 {
                memory::st_global::<u32>(out, memory::ld_shared::<u32>(smem() + 16));
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
        assert_eq!(read_u32(&gm, out), 7);
    }
}

/// Two warps store to one word: a write-write race.
#[test]
fn stores_in_different_warps_without_a_barrier() {
    let (first, second) = (Line::default(), Line::default());
    for seed in SCHEDULES {
        let e = failure(
            run(&GlobalMemory::new(), 64, 64, seed, || {
                if tid() == 0 {
                    first.next();
                    memory::st_shared::<u32>(smem(), 1);
                }
                if tid() == 32 {
                    second.next();
                    memory::st_shared::<[u32; 4]>(smem(), [2; 4]);
                }
            }),
            seed,
        );
        expect_race(&e, seed, &[&first.at(), &second.at(), "writes shared 0x400", "'s write"]);
    }
}

/// Byte granularity: two warps storing neighbouring bytes of one word do not race.
#[test]
fn stores_to_neighbouring_bytes_do_not_race() {
    for seed in SCHEDULES {
        run(&GlobalMemory::new(), 64, 64, seed, || {
            if tid() == 0 {
                memory::st_shared::<u8>(smem(), 1);
            }
            if tid() == 32 {
                memory::st_shared::<u8>(smem() + 1, 2);
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
    }
}

/// `bar.arrive` releases: a store before it is ordered before the loads after the
/// `bar.sync` of the same generation.
#[test]
fn bar_arrive_releases_to_bar_sync() {
    for seed in SCHEDULES {
        run(&GlobalMemory::new(), 64, 256, seed, || {
            let t = tid();
            if t < 32 {
                memory::st_shared::<u32>(smem() + 4 * t, t);
                barrier::arrive_only(1, 64);
            } else {
                barrier::sync(1, 64);
                let _ = memory::ld_shared::<u32>(smem() + 4 * (t - 32));
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
    }
}

/// ... but `bar.arrive` does not acquire: the arriving warp's load is not ordered after
/// the store the other warp made before its `bar.sync`.
#[test]
fn bar_arrive_does_not_acquire() {
    let (store, load) = (Line::default(), Line::default());
    for seed in SCHEDULES {
        let e = failure(
            run(&GlobalMemory::new(), 64, 256, seed, || {
                let t = tid();
                if t < 32 {
                    store.next();
                    memory::st_shared::<u32>(smem() + 4 * t, t);
                    barrier::sync(1, 64);
                } else {
                    barrier::arrive_only(1, 64);
                    load.next();
                    let _ = memory::ld_shared::<u32>(smem() + 4 * (t - 32));
                }
            }),
            seed,
        );
        expect_race(&e, seed, &[&store.at(), &load.at()]);
    }
}

/// Within a warp, a collective (`shfl.sync`, `elect.sync`) orders its lanes: lane 0's
/// store before it is ordered before lane 5's load after it.
#[test]
fn warp_collectives_order_their_lanes() {
    for seed in SCHEDULES {
        run(&GlobalMemory::new(), 64, 64, seed, || {
            let t = tid();
            if t == 0 {
                memory::st_shared::<u32>(smem(), 1);
            }
            if t < 32 {
                let _ = warp::shfl_sync_idx(t, 0);
            }
            if t == 5 {
                let _ = memory::ld_shared::<u32>(smem());
            }
            if (32..64).contains(&t) {
                let (_, elected) = warp::elect_sync(u32::MAX);
                if elected {
                    memory::st_shared::<u32>(smem() + 4, 2);
                }
                let _ = warp::elect_sync(u32::MAX);
                let _ = memory::ld_shared::<u32>(smem() + 4);
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
    }
}

/// ... but not across warps: warp 1's shuffle orders nothing with warp 0's store.
#[test]
fn a_collective_of_another_warp_orders_nothing() {
    for seed in SCHEDULES {
        let e = failure(
            run(&GlobalMemory::new(), 64, 64, seed, || {
                let t = tid();
                if t == 0 {
                    memory::st_shared::<u32>(smem(), 1);
                }
                if t >= 32 {
                    let _ = warp::shfl_sync_idx(t, 0);
                    let _ = memory::ld_shared::<u32>(smem());
                }
            }),
            seed,
        );
        expect_race(&e, seed, &["thread 0", "0x400"]);
    }
}

// ---------------------------------------------------------------------------------------
// mbarriers
// ---------------------------------------------------------------------------------------

/// A store released by `mbarrier.arrive` and acquired by a `try_wait` (blocking) or a
/// `test_wait` polling loop: ordered.
#[test]
fn store_and_load_ordered_by_an_mbarrier() {
    let gm = GlobalMemory::new();
    let out = gm.alloc("out", 8);
    for seed in SCHEDULES {
        run(&gm, 64, 64, seed, || {
            let (bar, data) = (smem(), smem() + 16);
            init_mbarrier(bar, 1);
            match tid() {
                0 => {
                    memory::st_shared::<u32>(data, 9);
                    mbarrier::arrive(bar);
                }
                32 => {
                    mbarrier::try_wait_parity(bar, 0);
                    memory::st_global::<u32>(out, memory::ld_shared::<u32>(data));
                }
                33 => {
                    while !mbarrier::test_wait_parity(bar, 0) {}
                    memory::st_global::<u32>(out + 4, memory::ld_shared::<u32>(data));
                }
                _ => {}
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
        assert_eq!((read_u32(&gm, out), read_u32(&gm, out + 4)), (9, 9));
    }
}

/// A store after the arrive is not released by it: the waiter's load races with it.
#[test]
fn store_after_the_mbarrier_arrive_races() {
    let (store, load) = (Line::default(), Line::default());
    for seed in SCHEDULES {
        let e = failure(
            run(&GlobalMemory::new(), 64, 64, seed, || {
                let (bar, data) = (smem(), smem() + 16);
                init_mbarrier(bar, 1);
                if tid() == 0 {
                    mbarrier::arrive(bar);
                    store.next();
                    memory::st_shared::<u32>(data, 9);
                }
                if tid() == 32 {
                    mbarrier::try_wait_parity(bar, 0);
                    load.next();
                    let _ = memory::ld_shared::<u32>(data);
                }
            }),
            seed,
        );
        expect_race(&e, seed, &[&store.at(), &load.at()]);
    }
}

// ---------------------------------------------------------------------------------------
// Asynchronous copies
// ---------------------------------------------------------------------------------------

/// Thread 0's `cp.async` lands at its `wait_group`, which orders the copy before thread 0
/// only: warp 1 reading the data with no barrier races with the copy's write.
#[test]
fn cp_async_result_read_by_another_warp_after_only_the_issuers_wait() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[1; 16]);
    let (copy, load) = (Line::default(), Line::default());
    for seed in SCHEDULES {
        let e = failure(
            run(&gm, 64, 64, seed, || {
                if tid() == 0 {
                    copy.next();
                    cp_async::copy(smem(), src, 16, 16);
                    cp_async::commit_group();
                    cp_async::wait_group(0);
                }
                if tid() == 32 {
                    load.next();
                    let _ = memory::ld_shared::<[u32; 4]>(smem());
                }
            }),
            seed,
        );
        if e.kind == ErrorKind::AsyncOwned {
            // This schedule ran the load between the issue and the wait: a stale read.
            assert!(seed.is_some(), "{e}");
            continue;
        }
        expect_race(&e, seed, &[&copy.at(), &load.at(), "cp.async"]);
        if seed.is_none() {
            assert!(e.message.contains("thread 32 (warp 1) reads shared 0x400"), "{e}");
            assert!(e.message.contains("thread 0's cp.async write"), "{e}");
        }
    }
}

/// The same with the issuer's wait followed by `bar.sync`: ordered.
#[test]
fn cp_async_result_read_after_wait_group_and_bar_sync() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[1; 16]);
    let out = gm.alloc("out", 4);
    for seed in SCHEDULES {
        run(&gm, 64, 64, seed, || {
            if tid() == 0 {
                cp_async::copy(smem(), src, 16, 16);
                cp_async::commit_group();
                cp_async::wait_group(0);
            }
            barrier::sync_all(0);
            if tid() == 32 {
                memory::st_global::<u32>(out, memory::ld_shared::<u32>(smem() + 12));
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
        assert_eq!(read_u32(&gm, out), 0x0101_0101);
    }
}

/// `cp.async.mbarrier.arrive.noinc`: the arrival the copy's completion makes on thread 0's
/// behalf releases the copy's write to whoever waits for the phase.
#[test]
fn cp_async_result_read_after_the_copies_mbarrier_arrival() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[2; 16]);
    for seed in SCHEDULES {
        run(&gm, 64, 64, seed, || {
            let (bar, dst) = (smem(), smem() + 16);
            init_mbarrier(bar, 1);
            if tid() == 0 {
                cp_async::copy(dst, src, 16, 16);
                cp_async::mbarrier_arrive(bar, true);
            }
            if tid() >= 32 {
                mbarrier::try_wait_parity(bar, 0);
                let _ = memory::ld_shared::<u32>(dst + 4 * (tid() % 4));
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
    }
}

/// A bulk copy's `complete_tx` releases its write (attributed to the issuing thread) to
/// the phase's waiters.
#[test]
fn bulk_copy_result_read_after_the_mbarrier_wait() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[3; 64]);
    for seed in SCHEDULES {
        run(&gm, 64, 128, seed, || {
            let (bar, dst) = (smem(), smem() + 64);
            init_mbarrier(bar, 1);
            if tid() == 0 {
                mbarrier::arrive_expect_tx(bar, 64);
                bulk::global_to_shared(dst, src, 64, bar);
            }
            mbarrier::try_wait_parity(bar, 0);
            let _ = memory::ld_shared::<u64>(dst + 8 * (tid() % 8));
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
    }
}

/// The classic pipeline bug: the consumer releases a buffer (arrives on `empty`) before
/// its last read of it, and the producer's bulk copy refills it. The copy may land any
/// time after its issue, so the read must be ordered before the issue.
#[test]
fn bulk_copy_into_a_buffer_still_being_read() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &[3; 64]);
    let (copy, load) = (Line::default(), Line::default());
    for seed in SCHEDULES {
        let e = failure(
            run(&gm, 64, 128, seed, || {
                let (empty, full, buf) = (smem(), smem() + 8, smem() + 64);
                if tid() == 0 {
                    mbarrier::init(empty, 32);
                    mbarrier::init(full, 1);
                    fence::mbarrier_init();
                }
                barrier::sync_all(0);
                if tid() == 0 {
                    mbarrier::try_wait_parity(empty, 0);
                    mbarrier::arrive_expect_tx(full, 64);
                    copy.next();
                    bulk::global_to_shared(buf, src, 64, full);
                    mbarrier::try_wait_parity(full, 0);
                }
                if tid() >= 32 {
                    mbarrier::arrive(empty);
                    load.next();
                    let _ = memory::ld_shared::<u16>(buf + 2 * (tid() - 32));
                }
            }),
            seed,
        );
        if e.kind == ErrorKind::AsyncOwned {
            // This schedule ran the read while the copy was pending: a stale read.
            assert!(seed.is_some(), "{e}");
            continue;
        }
        expect_race(&e, seed, &[&copy.at(), &load.at(), "bulk copy"]);
    }
}

// ---------------------------------------------------------------------------------------
// wgmma
// ---------------------------------------------------------------------------------------

/// sm_90 wgmma descriptor of a K-major 128B-swizzled operand (SBO 1024, LBO 16).
fn desc_sw128(addr: u32) -> u64 {
    ((addr as u64 >> 4) & 0x3FFF) | (1 << 16) | ((1024u64 >> 4) << 32) | (1 << 62)
}

/// A 64 x k16 A tile at the base and an 8-row B tile 8 KiB above it.
const WGMMA_SMEM: u32 = 8 * 1024 + 1024;

/// Warpgroup 1 issues an m64n8k16 on the tiles.
fn wgmma_on_the_tiles(issue: &Line) {
    let mut acc = [0f32; 4];
    wgmma::fence();
    let args = wgmma::MmaArgs {
        accumulators: acc.as_mut_ptr(),
        n: 8,
        a: desc_sw128(smem()),
        desc_b: desc_sw128(smem() + 8 * 1024),
        accumulate: false,
        negate_a: false,
        negate_b: false,
        a_in_registers: false,
        inputs: Default::default(),
    };
    // SAFETY: `acc` lives until the wait below.
    issue.next();
    unsafe { wgmma::mma_async(args) };
    wgmma::commit_group();
    wgmma::wait_group(0);
}

/// Warpgroup 0 fills the operand tiles (fenced for the async proxy) and warpgroup 1's
/// wgmma reads them, with nothing ordering the two.
#[test]
fn wgmma_reads_operands_another_warpgroup_wrote_without_a_barrier() {
    let (store, issue) = (Line::default(), Line::default());
    for seed in SCHEDULES {
        let e = failure(
            run(&GlobalMemory::new(), 256, WGMMA_SMEM, seed, || {
                let t = tid();
                if t < 128 {
                    for i in (t..WGMMA_SMEM / 16).step_by(128) {
                        store.next();
                        memory::st_shared::<[u32; 4]>(smem() + 16 * i, [0; 4]);
                    }
                    fence::proxy_async_shared_cta();
                } else {
                    wgmma_on_the_tiles(&issue);
                }
            }),
            seed,
        );
        // Other schedules overwrite an operand of the in-flight wgmma, or let it read
        // bytes still unfenced: reported as such.
        if matches!(e.kind, ErrorKind::InFlightRead | ErrorKind::MissingProxyFence) {
            assert!(seed.is_some(), "{e}");
            continue;
        }
        expect_race(&e, seed, &[&store.at(), &issue.at(), "wgmma of warpgroup 1"]);
        if seed.is_none() {
            // Round robin: warpgroup 0 writes everything first; the issue is blamed.
            assert!(e.message.starts_with("the wgmma of warpgroup 1 reads shared"), "{e}");
            assert_eq!(e.location.map(|l| format!("{}:{}", l.file(), l.line())), Some(issue.at()));
        }
    }
}

/// The same with `bar.sync` between the fence and the wgmma, and a later overwrite after
/// a second `bar.sync` that follows the `wgmma.wait_group`: all ordered.
#[test]
fn wgmma_operands_ordered_by_barriers() {
    let issue = Line::default();
    for seed in SCHEDULES {
        run(&GlobalMemory::new(), 256, WGMMA_SMEM, seed, || {
            let t = tid();
            if t < 128 {
                for i in (t..WGMMA_SMEM / 16).step_by(128) {
                    memory::st_shared::<[u32; 4]>(smem() + 16 * i, [0; 4]);
                }
                fence::proxy_async_shared_cta();
            }
            barrier::sync_all(0);
            if t >= 128 {
                wgmma_on_the_tiles(&issue);
            }
            barrier::sync_all(0);
            if t < 128 {
                memory::st_shared::<[u32; 4]>(smem() + 16 * t, [1; 4]);
            }
        })
        .unwrap_or_else(|e| panic!("schedule {seed:?}: {e}"));
    }
}

/// Overwriting an operand after the wgmma completed, but with nothing ordering the store
/// after the issuing warpgroup's `wgmma.wait_group`: a race with the wgmma's read (which
/// the emulator records at that wait). Warpgroup 0 only polls an mbarrier a while before
/// storing (a poll that fails orders nothing), so round robin runs the whole wgmma first.
#[test]
fn operand_overwritten_after_the_wgmma_without_a_barrier() {
    let (store, issue) = (Line::default(), Line::default());
    let e = failure(
        run(&GlobalMemory::new(), 256, WGMMA_SMEM + 64, None, || {
            let t = tid();
            let flag = smem() + WGMMA_SMEM;
            init_mbarrier(flag, 1);
            if t >= 128 {
                for i in ((t - 128)..WGMMA_SMEM / 16).step_by(128) {
                    memory::st_shared::<[u32; 4]>(smem() + 16 * i, [0; 4]);
                }
                fence::proxy_async_shared_cta();
            }
            barrier::sync_all(0);
            if t >= 128 {
                wgmma_on_the_tiles(&issue);
            } else {
                for _ in 0..50 {
                    if mbarrier::test_wait_parity(flag, 0) {
                        break;
                    }
                }
                store.next();
                memory::st_shared::<[u32; 4]>(smem() + 16 * t, [1; 4]);
                if t == 0 {
                    mbarrier::arrive(flag);
                }
            }
        }),
        None,
    );
    expect_race(
        &e,
        None,
        &[&store.at(), &issue.at(), "thread 0 (warp 0) writes shared 0x400", "the read of warpgroup 1's wgmma"],
    );
}

// ---------------------------------------------------------------------------------------
// Seeded schedules
// ---------------------------------------------------------------------------------------

/// A race that only some schedules expose. Warp 1 waits at a named barrier for warp 0;
/// each warp-0 thread then stores its word and arrives on an mbarrier (count 32). A
/// warp-1 thread that finds the phase still open (a single `test_wait`) reads its word
/// with nothing ordering the read after the store. Round robin never shows it: the warp-0
/// thread whose `bar.arrive` completes the barrier keeps running through its store and
/// arrival, so the phase is complete before any warp-1 thread looks. Only a preemption
/// right after that `bar.arrive` shows it, and some seeds do.
#[test]
fn a_race_only_preemption_exposes_is_found_by_some_seed() {
    let (store, load) = (Line::default(), Line::default());
    let kernel = || {
        let (bar, data) = (smem(), smem() + 64);
        init_mbarrier(bar, 32);
        let t = tid();
        if t < 32 {
            barrier::arrive_only(1, 64);
            store.next();
            memory::st_shared::<u32>(data + 4 * t, t);
            mbarrier::arrive(bar);
        } else {
            barrier::sync(1, 64);
            if !mbarrier::test_wait_parity(bar, 0) {
                load.next();
                let _ = memory::ld_shared::<u32>(data + 4 * (t - 32));
            }
        }
    };
    let gm = GlobalMemory::new();
    run(&gm, 64, 256, None, kernel).expect("round robin does not expose the race");
    let mut found = Vec::new();
    for seed in 0..16 {
        match run(&gm, 64, 256, Some(seed), kernel) {
            Ok(_) => {}
            Err(e) => {
                expect_race(&e, Some(seed), &[&store.at(), &load.at()]);
                found.push((seed, e.message));
            }
        }
    }
    assert!(!found.is_empty(), "no seed of 0..16 exposed the race");
    // A seed replays its schedule exactly.
    let (seed, message) = &found[0];
    let again = failure(run(&gm, 64, 256, Some(*seed), kernel), Some(*seed));
    assert_eq!(&again.message, message);
}

/// Race detection can be turned off (`Options::detect_races`).
#[test]
fn race_detection_off() {
    let options = Options { detect_races: false, ..Options::default() };
    emu::launch_with(&GlobalMemory::new(), one_cta(64, 64), &options, || {
        if tid() == 0 {
            memory::st_shared::<u32>(smem(), 7);
        }
        if tid() == 32 {
            let _ = memory::ld_shared::<u32>(smem());
        }
    })
    .expect("no race is reported with detection off");
}

/// Several CTAs under one seed: each CTA's schedule is its own, so a seed replays the
/// same interleaving, and another seed gives another.
#[test]
fn seeded_schedules_are_reproducible() {
    let gm = GlobalMemory::new();
    let config = LaunchConfig { grid: [4, 1, 1], block: [64, 1, 1], dynamic_smem: 64 };
    // The order in which the threads of each CTA pass the line after the barrier.
    let order = |seed: u64| -> Vec<Vec<u32>> {
        let log: Vec<std::sync::Mutex<Vec<u32>>> = (0..4).map(|_| std::sync::Mutex::new(Vec::new())).collect();
        let options = Options { seed: Some(seed), ..Options::default() };
        emu::launch_with(&gm, config, &options, || {
            barrier::sync_all(0);
            let _ = special::tid();
            barrier::sync_all(0);
            log[special::ctaid()[0] as usize].lock().unwrap().push(tid());
        })
        .unwrap();
        log.into_iter().map(|m| m.into_inner().unwrap()).collect()
    };
    assert_eq!(order(42), order(42), "the same seed gave two different schedules");
    assert_ne!(order(42), order(43), "two seeds gave the same schedule");
}
