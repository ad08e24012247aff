//! Each instruction model of the emulator through a real launch, on tiny cases whose
//! results are checked by hand (or against a plain CPU computation).
//!
//! Kernels write what they observe to global memory (or to a host-side `Mutex`), and the
//! test asserts on it after the launch. The pure models in `emu::model` have their own
//! unit tests; here only the layout helpers `acc_coord` / `a_frag_coord` are borrowed to
//! map register fragments to matrix coordinates.

use std::sync::Mutex;

use emu::model::tensor_map::{OobFill, TmaSwizzle};
use emu::model::wgmma::{a_frag_coord, acc_coord};
use emu::ops::{barrier, bulk, cp_async, fence, mbarrier, memory, numeric, special, warp, wgmma};
use emu::{GlobalMemory, LaunchConfig, Stats, TensorMap};

mod common;
use common::*;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Launches one CTA and fails the test with the emulator's report if the launch fails.
#[track_caller]
fn run(gm: &GlobalMemory, threads: u32, smem: u32, kernel: impl Fn() + Sync) -> Stats {
    emu::launch(gm, one_cta(threads, smem), kernel).unwrap_or_else(|e| panic!("unexpected emulator report: {e}"))
}

/// A zero-filled global allocation of `n` 32-bit words (kernels' output).
fn zeroed(gm: &GlobalMemory, name: &str, bytes: usize) -> u64 {
    gm.alloc_from(name, &vec![0; bytes])
}

fn read_bytes(gm: &GlobalMemory, addr: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    gm.read(addr, &mut out).expect("readable");
    out
}

fn read_u32s(gm: &GlobalMemory, addr: u64, n: usize) -> Vec<u32> {
    read_bytes(gm, addr, 4 * n).chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn read_f32s(gm: &GlobalMemory, addr: u64, n: usize) -> Vec<f32> {
    read_u32s(gm, addr, n).into_iter().map(f32::from_bits).collect()
}

/// `n` bytes of a recognisable pattern with no zero byte (so zero fill stands out).
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i as u32 * 37 + seed as u32 * 11) % 255) as u8 + 1).collect()
}

// ---------------------------------------------------------------------------------------
// 1. Special registers
// ---------------------------------------------------------------------------------------

/// %tid, %ntid, %ctaid, %nctaid and %laneid take the right values in every thread of a
/// 2x3x1 grid of 16x2x2 (= 64-thread) CTAs; dynamic shared memory starts at 0x400 and has
/// the launch's size.
#[test]
fn special_registers_across_a_grid() {
    const WORDS: usize = 15;
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 6 * 64 * WORDS * 4);
    let config = LaunchConfig { grid: [2, 3, 1], block: [16, 2, 2], dynamic_smem: 4096 };
    let stats = emu::launch(&gm, config, || {
        let [tx, ty, tz] = special::tid();
        let [cx, cy, _] = special::ctaid();
        let slot = (cx + 2 * cy) * 64 + tx + 16 * ty + 32 * tz;
        let values = [special::tid(), special::ntid(), special::ctaid(), special::nctaid()];
        let base = out + slot as u64 * WORDS as u64 * 4;
        for (i, v) in values.iter().flatten().enumerate() {
            memory::st_global::<u32>(base + 4 * i as u64, *v);
        }
        memory::st_global::<u32>(base + 48, special::laneid());
        memory::st_global::<u32>(base + 52, special::dynamic_smem_base());
        memory::st_global::<u32>(base + 56, special::dynamic_smem_size());
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((stats.ctas, stats.threads), (6, 384));
    let words = read_u32s(&gm, out, 6 * 64 * WORDS);
    for cy in 0..3u32 {
        for cx in 0..2u32 {
            for t in 0..64u32 {
                let slot = ((cx + 2 * cy) * 64 + t) as usize;
                let got = &words[slot * WORDS..(slot + 1) * WORDS];
                let want =
                    [t % 16, (t / 16) % 2, t / 32, 16, 2, 2, cx, cy, 0, 2, 3, 1, t % 32, emu::DYNAMIC_SMEM_BASE, 4096];
                assert_eq!(got, want, "CTA ({cx},{cy}) thread {t}");
            }
        }
    }
    assert_eq!(emu::DYNAMIC_SMEM_BASE, 0x400);
}

// ---------------------------------------------------------------------------------------
// 2. Loads and stores
// ---------------------------------------------------------------------------------------

/// ld/st.global and ld/st.shared of every width (u8, u16, u32, u64, [u32; 4]) move exactly
/// their bytes: each thread copies its 32-byte record global → shared, and after a barrier
/// its neighbour's record shared → global. Byte 1 of each record is written by no one and
/// keeps the fresh-allocation pattern.
#[test]
fn loads_and_stores_of_every_width() {
    let gm = GlobalMemory::new();
    let input = pattern(32 * 32, 3);
    let src = gm.alloc_from("in", &input);
    let dst = gm.alloc("out", 32 * 32);
    run(&gm, 32, 32 * 32, || {
        let t = tid();
        let (g, s) = (src + 32 * t as u64, smem() + 32 * t);
        memory::st_shared::<u8>(s, memory::ld_global::<u8>(g));
        memory::st_shared::<u16>(s + 2, memory::ld_global::<u16>(g + 2));
        memory::st_shared::<u32>(s + 4, memory::ld_global::<u32>(g + 4));
        memory::st_shared::<u64>(s + 8, memory::ld_global::<u64>(g + 8));
        memory::st_shared::<[u32; 4]>(s + 16, memory::ld_global::<[u32; 4]>(g + 16));
        barrier::sync_all(0);
        let (s, g) = (smem() + 32 * ((t + 1) % 32), dst + 32 * t as u64);
        memory::st_global::<u8>(g, memory::ld_shared::<u8>(s));
        memory::st_global::<u16>(g + 2, memory::ld_shared::<u16>(s + 2));
        memory::st_global::<u32>(g + 4, memory::ld_shared::<u32>(s + 4));
        memory::st_global::<u64>(g + 8, memory::ld_shared::<u64>(s + 8));
        memory::st_global::<[u32; 4]>(g + 16, memory::ld_shared::<[u32; 4]>(s + 16));
    });
    let out = read_bytes(&gm, dst, 32 * 32);
    for t in 0..32 {
        let (got, from) = (&out[32 * t..32 * t + 32], &input[32 * ((t + 1) % 32)..][..32]);
        assert_eq!(got[0], from[0], "u8 of thread {t}");
        assert_eq!(got[1], emu::UNINITIALISED_BYTE, "byte 1 of thread {t} was never written");
        assert_eq!(got[2..], from[2..], "u16..[u32; 4] of thread {t}");
    }
}

/// Shared memory is private to each CTA and starts filled with SHARED_INITIAL_BYTE: in a
/// grid of 4 CTAs each thread first reads the fresh pattern, then sees only its own CTA's
/// writes.
#[test]
fn shared_memory_is_private_per_cta() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 4 * 32 * 8);
    let config = LaunchConfig { grid: [4, 1, 1], block: [32, 1, 1], dynamic_smem: 128 };
    emu::launch(&gm, config, || {
        let (t, c) = (tid(), special::ctaid()[0]);
        let before = memory::ld_shared::<u32>(smem() + 4 * t);
        memory::st_shared::<u32>(smem() + 4 * t, 1000 * c + t);
        barrier::sync_all(0);
        let after = memory::ld_shared::<u32>(smem() + 4 * ((t + 5) % 32));
        let slot = out + 8 * (32 * c + t) as u64;
        memory::st_global::<[u32; 2]>(slot, [before, after]);
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let words = read_u32s(&gm, out, 4 * 32 * 2);
    let fresh = u32::from_le_bytes([emu::SHARED_INITIAL_BYTE; 4]);
    for c in 0..4 {
        for t in 0..32 {
            let i = 2 * (32 * c + t) as usize;
            assert_eq!(words[i], fresh, "CTA {c} thread {t} saw another CTA's shared memory");
            assert_eq!(words[i + 1], 1000 * c + (t + 5) % 32, "CTA {c} thread {t}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// 3. Named barriers
// ---------------------------------------------------------------------------------------

/// bar.sync waits: warp 1 writes, warp 0 reads after bar.sync. Warp 0 runs first, so it
/// only sees the data if the barrier held it back.
#[test]
fn bar_sync_holds_the_consumer_until_the_producer_arrives() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 32 * 4);
    run(&gm, 64, 32 * 4, || {
        let t = tid();
        if t >= 32 {
            memory::st_shared::<u32>(smem() + 4 * (t - 32), t * 3);
        }
        barrier::sync_all(0);
        if t < 32 {
            memory::st_global::<u32>(out + 4 * t as u64, memory::ld_shared::<u32>(smem() + 4 * t));
        }
    });
    assert_eq!(read_u32s(&gm, out, 32), (32..64).map(|t| t * 3).collect::<Vec<_>>());
}

/// bar.sync with an explicit thread count on a named barrier: warps 1 and 3 meet on
/// barrier 1 with count 64 while warps 0 and 2 never touch it (and exit).
#[test]
fn bar_sync_with_count_between_two_warps() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 32 * 4);
    let stats = run(&gm, 128, 32 * 4, || {
        let (t, w) = (tid(), tid() / 32);
        if w == 3 {
            memory::st_shared::<u32>(smem() + 4 * (t % 32), t + 7);
            barrier::sync(1, 64);
        } else if w == 1 {
            barrier::sync(1, 64);
            memory::st_global::<u32>(out + 4 * (t % 32) as u64, memory::ld_shared::<u32>(smem() + 4 * (t % 32)));
        }
    });
    assert_eq!(read_u32s(&gm, out, 32), (96..128).map(|t| t + 7).collect::<Vec<_>>());
    assert_eq!(stats.instructions["bar.sync"], 64);
}

/// bar.arrive pairs with bar.sync: the producer arrives without waiting, the consumer
/// waits. Both orders: the consumer already waiting (barrier 2) and the consumer arriving
/// after the producer's bar.arrive (barrier 3, warp 1 waits first and warp 0 arrives).
#[test]
fn bar_arrive_pairs_with_bar_sync() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 64 * 4);
    run(&gm, 64, 64 * 4, || {
        let (t, lane) = (tid(), tid() % 32);
        if t >= 32 {
            memory::st_shared::<u32>(smem() + 4 * lane, 100 + lane);
            barrier::arrive_only(2, 64);
            barrier::sync(3, 64);
            memory::st_global::<u32>(out + 4 * t as u64, memory::ld_shared::<u32>(smem() + 128 + 4 * lane));
        } else {
            barrier::sync(2, 64);
            let got = memory::ld_shared::<u32>(smem() + 4 * lane);
            memory::st_global::<u32>(out + 4 * t as u64, got);
            memory::st_shared::<u32>(smem() + 128 + 4 * lane, 200 + got);
            barrier::arrive_only(3, 64);
        }
    });
    let words = read_u32s(&gm, out, 64);
    assert_eq!(words[..32], (100..132).collect::<Vec<_>>());
    assert_eq!(words[32..], (300..332).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------
// 4. mbarrier
// ---------------------------------------------------------------------------------------

/// Phase and parity: a fresh barrier's "previous phase" (parity 1) counts as complete;
/// phase 0 completes at the init count of arrivals, and then parity 0 tests true and
/// parity 1 false until phase 1 completes. arrive returns the phase it arrived on, and
/// test_wait never blocks.
#[test]
fn mbarrier_phases_and_parity() {
    let gm = GlobalMemory::new();
    let seen = Mutex::new(Vec::new());
    run(&gm, 32, 64, || {
        if tid() != 0 {
            return;
        }
        let bar = smem();
        let probe = |what: &'static str| {
            let p = (mbarrier::test_wait_parity(bar, 0), mbarrier::test_wait_parity(bar, 1));
            seen.lock().unwrap().push((what, p));
        };
        mbarrier::init(bar, 2);
        probe("fresh");
        let s0 = mbarrier::arrive(bar);
        probe("phase 0, one arrival");
        let s1 = mbarrier::arrive(bar);
        probe("phase 0 complete");
        let s2 = mbarrier::arrive(bar);
        probe("phase 1, one arrival");
        let s3 = mbarrier::arrive(bar);
        probe("phase 1 complete");
        // try_wait on a completed phase returns at once (the launch would deadlock otherwise).
        assert!(mbarrier::try_wait_parity(bar, 1));
        seen.lock().unwrap().push(("arrive states", ((s0, s1) == (0, 0), (s2, s3) == (1, 1))));
    });
    let seen = seen.into_inner().unwrap();
    assert_eq!(
        seen,
        [
            ("fresh", (false, true)),
            ("phase 0, one arrival", (false, true)),
            ("phase 0 complete", (true, false)),
            ("phase 1, one arrival", (true, false)),
            ("phase 1 complete", (false, true)),
            ("arrive states", (true, true)),
        ]
    );
}

/// try_wait blocks until the init count of arrivals: warp 0 waits on a barrier of count
/// 32 that warp 1 arrives on after writing data; warp 0 then sees the data.
#[test]
fn mbarrier_wait_blocks_until_every_arrival() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 32 * 4);
    run(&gm, 64, 8 + 32 * 4, || {
        let (t, bar, data) = (tid(), smem(), smem() + 8);
        if t == 0 {
            mbarrier::init(bar, 32);
        }
        barrier::sync_all(0);
        if t < 32 {
            mbarrier::try_wait_parity(bar, 0);
            memory::st_global::<u32>(out + 4 * t as u64, memory::ld_shared::<u32>(data + 4 * t));
        } else {
            memory::st_shared::<u32>(data + 4 * (t - 32), t * t);
            mbarrier::arrive(bar);
        }
    });
    assert_eq!(read_u32s(&gm, out, 32), (32..64).map(|t| t * t).collect::<Vec<_>>());
}

/// arrive.expect_tx + a 1-D bulk copy: the phase completes only when the copy's
/// complete_tx balances the expected bytes; before the wait test_wait is false, after it
/// exactly the copied bytes have landed (the next byte keeps the fresh pattern).
#[test]
fn mbarrier_expect_tx_completes_with_a_bulk_copy() {
    let gm = GlobalMemory::new();
    let data = pattern(256, 9);
    let src = gm.alloc_from("src", &data);
    assert_eq!(src % 16, 0, "global allocations are 16-byte aligned");
    let out = gm.alloc("out", 32 * 9);
    let early = Mutex::new(Vec::new());
    run(&gm, 32, 128 + 272, || {
        let (t, bar, dst) = (tid(), smem(), smem() + 128);
        if t == 0 {
            mbarrier::init(bar, 1);
            fence::mbarrier_init();
            mbarrier::arrive_expect_tx(bar, 256);
            bulk::global_to_shared(dst, src, 256, bar);
        }
        barrier::sync_all(0);
        // Poll before taking the host lock: a false poll lets the other threads run.
        let landed = mbarrier::test_wait_parity(bar, 0);
        early.lock().unwrap().push(landed);
        mbarrier::try_wait_parity(bar, 0);
        memory::st_global::<u64>(out + 8 * t as u64, memory::ld_shared::<u64>(dst + 8 * t));
        if t == 0 {
            memory::st_global::<u8>(out + 256, memory::ld_shared::<u8>(dst + 256));
        }
    });
    assert_eq!(early.into_inner().unwrap(), vec![false; 32], "the copy landed before anyone waited");
    let got = read_bytes(&gm, out, 257);
    assert_eq!(got[..256], data[..]);
    assert_eq!(got[256], emu::SHARED_INITIAL_BYTE, "the copy wrote past its size");
}

/// A two-stage ring: one producer thread fills stage i % 2 with a bulk copy (waiting on
/// the stage's "empty" barrier with the flipped parity, which passes at once for a fresh
/// barrier), 32 consumers wait on the stage's "full" barrier with parity (i / 2) % 2 and
/// release it. Six chunks go through, so each barrier goes through three phases.
#[test]
fn mbarrier_two_stage_ring() {
    const CHUNKS: u32 = 6;
    let gm = GlobalMemory::new();
    let data = pattern(64 * CHUNKS as usize, 1);
    let src = gm.alloc_from("src", &data);
    let out = gm.alloc("out", data.len());
    run(&gm, 64, 32 + 2 * 64, || {
        let t = tid();
        let full = |s: u32| smem() + 8 * s;
        let empty = |s: u32| smem() + 16 + 8 * s;
        let buf = |s: u32| smem() + 32 + 64 * s;
        if t == 0 {
            for s in 0..2 {
                mbarrier::init(full(s), 1);
                mbarrier::init(empty(s), 32);
            }
            fence::mbarrier_init();
        }
        barrier::sync_all(0);
        if t == 32 {
            for i in 0..CHUNKS {
                let (s, parity) = (i % 2, (i / 2) % 2);
                mbarrier::try_wait_parity(empty(s), parity ^ 1);
                if i % 2 == 0 {
                    mbarrier::arrive_expect_tx(full(s), 64);
                } else {
                    mbarrier::expect_tx(full(s), 64);
                    mbarrier::arrive(full(s));
                }
                bulk::global_to_shared(buf(s), src + 64 * i as u64, 64, full(s));
            }
        } else if t < 32 {
            for i in 0..CHUNKS {
                let (s, parity) = (i % 2, (i / 2) % 2);
                mbarrier::try_wait_parity(full(s), parity);
                let v = memory::ld_shared::<u16>(buf(s) + 2 * t);
                memory::st_global::<u16>(out + 64 * i as u64 + 2 * t as u64, v);
                mbarrier::arrive(empty(s));
            }
        }
    });
    assert_eq!(read_bytes(&gm, out, data.len()), data);
}

/// Polling with test_wait (legal: it is the non-blocking form of the wait) must let the
/// arriving threads run: warp 0 polls a barrier that warp 1 arrives on after writing data.
#[test]
fn mbarrier_test_wait_polling_lets_other_threads_run() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 32 * 4);
    run(&gm, 64, 8 + 32 * 4, || {
        let (t, bar, data) = (tid(), smem(), smem() + 8);
        if t == 0 {
            mbarrier::init(bar, 32);
        }
        barrier::sync_all(0);
        if t < 32 {
            let mut polls = 0;
            while !mbarrier::test_wait_parity(bar, 0) {
                polls += 1;
                assert!(polls < 10_000, "phase 0 still incomplete after {polls} polls");
            }
            memory::st_global::<u32>(out + 4 * t as u64, memory::ld_shared::<u32>(data + 4 * t));
        } else {
            memory::st_shared::<u32>(data + 4 * (t - 32), t);
            mbarrier::arrive(bar);
        }
    });
    assert_eq!(read_u32s(&gm, out, 32), (32..64).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------
// 5. cp.async
// ---------------------------------------------------------------------------------------

/// cp.async of 16, 8 and 4 bytes copies `src_size` bytes and zero-fills the rest of the
/// destination; with src_size 0 the source is not read at all, and a source range cut
/// short by src_size may end exactly at the allocation's end.
#[test]
fn cp_async_sizes_and_zero_fill() {
    let gm = GlobalMemory::new();
    let data = pattern(40, 5);
    let src = gm.alloc_from("src", &data);
    let out = gm.alloc("out", 81);
    run(&gm, 32, 96, || {
        if tid() != 0 {
            return;
        }
        let d = smem();
        cp_async::copy(d, src, 16, 16);
        cp_async::copy(d + 16, src + 16, 16, 10);
        cp_async::copy(d + 32, src + 8, 8, 8);
        cp_async::copy(d + 40, src + 16, 8, 3);
        cp_async::copy(d + 48, src + 4, 4, 4);
        cp_async::copy(d + 52, src + 36, 4, 1);
        cp_async::copy(d + 56, 0, 4, 0);
        cp_async::copy(d + 64, src + 32, 16, 8);
        cp_async::wait_all();
        for i in 0..81 {
            memory::st_global::<u8>(out + i as u64, memory::ld_shared::<u8>(d + i));
        }
    });
    let got = read_bytes(&gm, out, 81);
    let mut want = Vec::new();
    want.extend_from_slice(&data[0..16]);
    want.extend_from_slice(&data[16..26]);
    want.extend_from_slice(&[0; 6]);
    want.extend_from_slice(&data[8..16]);
    want.extend_from_slice(&data[16..19]);
    want.extend_from_slice(&[0; 5]);
    want.extend_from_slice(&data[4..8]);
    want.extend_from_slice(&[data[36], 0, 0, 0]);
    want.extend_from_slice(&[0; 4]);
    want.extend_from_slice(&[emu::SHARED_INITIAL_BYTE; 4]);
    want.extend_from_slice(&data[32..40]);
    want.extend_from_slice(&[0; 8]);
    want.push(emu::SHARED_INITIAL_BYTE);
    assert_eq!(got, want);
}

/// commit_group / wait_group(n): with three groups committed, wait_group(2) lands the
/// oldest, wait_group(1) the second, wait_group(0) the last (that a newer group is still
/// pending after wait_group(n) is checked in detectors.rs, as reading it is reported).
#[test]
fn cp_async_wait_group_completes_the_oldest_groups() {
    let gm = GlobalMemory::new();
    let data = pattern(48, 2);
    let src = gm.alloc_from("src", &data);
    let out = gm.alloc("out", 48);
    let observed = Mutex::new(Vec::new());
    run(&gm, 32, 48, || {
        if tid() != 0 {
            return;
        }
        for g in 0..3u32 {
            cp_async::copy(smem() + 16 * g, src + 16 * g as u64, 16, 16);
            cp_async::commit_group();
        }
        cp_async::wait_group(2);
        observed.lock().unwrap().push(memory::ld_shared::<[u32; 4]>(smem()));
        cp_async::wait_group(1);
        observed.lock().unwrap().push(memory::ld_shared::<[u32; 4]>(smem() + 16));
        cp_async::wait_group(0);
        for i in 0..3 {
            memory::st_global::<[u32; 4]>(out + 16 * i, memory::ld_shared::<[u32; 4]>(smem() + 16 * i as u32));
        }
    });
    assert_eq!(read_bytes(&gm, out, 48), data);
    let words = |range: std::ops::Range<usize>| -> [u32; 4] {
        let b = &data[range];
        std::array::from_fn(|i| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()))
    };
    assert_eq!(observed.into_inner().unwrap(), [words(0..16), words(16..32)]);
}

/// cp.async.wait_all commits the uncommitted copies and waits for everything.
#[test]
fn cp_async_wait_all_lands_uncommitted_copies() {
    let gm = GlobalMemory::new();
    let data = pattern(32 * 16, 4);
    let src = gm.alloc_from("src", &data);
    let out = gm.alloc("out", data.len());
    run(&gm, 32, 32 * 16, || {
        let t = tid();
        cp_async::copy(smem() + 16 * t, src + 16 * t as u64, 16, 16);
        cp_async::wait_all();
        barrier::sync_all(0);
        let other = (t + 3) % 32;
        memory::st_global::<[u32; 4]>(out + 16 * other as u64, memory::ld_shared::<[u32; 4]>(smem() + 16 * other));
    });
    assert_eq!(read_bytes(&gm, out, data.len()), data);
}

/// cp.async.mbarrier.arrive.noinc counts toward the init count: 32 lanes each copy 16
/// bytes and arrive on a barrier of count 32; after the wait every lane reads another
/// lane's copy.
#[test]
fn cp_async_mbarrier_arrive_noinc_counts_toward_init() {
    let gm = GlobalMemory::new();
    let data = pattern(32 * 16, 6);
    let src = gm.alloc_from("src", &data);
    let out = gm.alloc("out", data.len());
    run(&gm, 32, 16 + 32 * 16, || {
        let (t, bar, buf) = (tid(), smem(), smem() + 16);
        if t == 0 {
            mbarrier::init(bar, 32);
        }
        barrier::sync_all(0);
        cp_async::copy(buf + 16 * t, src + 16 * t as u64, 16, 16);
        cp_async::mbarrier_arrive(bar, true);
        mbarrier::try_wait_parity(bar, 0);
        let other = (t + 1) % 32;
        memory::st_global::<[u32; 4]>(out + 16 * other as u64, memory::ld_shared::<[u32; 4]>(buf + 16 * other));
    });
    assert_eq!(read_bytes(&gm, out, data.len()), data);
}

/// Without .noinc, cp.async.mbarrier.arrive first increments the pending count, so its
/// arrival does not count toward the init count: after the copy has landed the phase of
/// a count-1 barrier is still open until a regular arrive. With .noinc the same sequence
/// completes the phase.
#[test]
fn cp_async_mbarrier_arrive_without_noinc_does_not_count() {
    let gm = GlobalMemory::new();
    let src = gm.alloc_from("src", &pattern(16, 8));
    let seen = Mutex::new(Vec::new());
    run(&gm, 32, 64, || {
        if tid() != 0 {
            return;
        }
        let (inc, noinc) = (smem(), smem() + 8);
        mbarrier::init(inc, 1);
        mbarrier::init(noinc, 1);
        cp_async::copy(smem() + 16, src, 16, 16);
        cp_async::mbarrier_arrive(inc, false);
        cp_async::copy(smem() + 32, src, 16, 16);
        cp_async::mbarrier_arrive(noinc, true);
        cp_async::wait_all();
        let mut s = seen.lock().unwrap();
        s.push(("inc after copies", mbarrier::test_wait_parity(inc, 0)));
        s.push(("noinc after copies", mbarrier::test_wait_parity(noinc, 0)));
        mbarrier::arrive(inc);
        s.push(("inc after arrive", mbarrier::test_wait_parity(inc, 0)));
    });
    assert_eq!(
        seen.into_inner().unwrap(),
        [("inc after copies", false), ("noinc after copies", true), ("inc after arrive", true)]
    );
}

// ---------------------------------------------------------------------------------------
// 6. Bulk tensor copies
// ---------------------------------------------------------------------------------------

/// A 2-D u8 tensor map with 128-byte swizzle (box 128 x 8, one span wide).
fn u8_map(addr: u64, dims: [u64; 2], stride: u64) -> TensorMap {
    TensorMap {
        elem_bytes: 1,
        rank: 2,
        global_addr: addr,
        dims: [dims[0], dims[1], 0, 0, 0],
        strides: [0, stride, 0, 0, 0],
        box_dims: [128, 8, 0, 0, 0],
        elem_strides: [1, 1, 0, 0, 0],
        swizzle: TmaSwizzle::B128,
        oob_fill: OobFill::Zero,
    }
}

/// Places a tensor map in global memory, as the host passes a `CUtensorMap`.
fn upload_map(gm: &GlobalMemory, map: &TensorMap) -> u64 {
    gm.alloc_from("tensor map", &map.encode().expect("valid tensor map"))
}

/// Byte offset in a 1024-byte-aligned tile of 128-byte rows, 128B swizzle: chunk `c` of
/// row `r` lands at chunk `c ^ (r % 8)`.
fn sw128_byte(row: u32, byte: u32) -> u32 {
    (row / 8) * 1024 + (row % 8) * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16
}

/// Copies `bytes` bytes of shared memory at `from` to global `to`, 16 at a time.
fn dump_shared(from: u32, to: u64, bytes: u32) {
    for i in (0..bytes).step_by(16) {
        memory::st_global::<[u32; 4]>(to + i as u64, memory::ld_shared::<[u32; 4]>(from + i));
    }
}

/// A tensor copy of a 128 x 8 u8 box at (128, 4) from a 256 x 16 tensor lands row r,
/// 16-byte chunk c at chunk c ^ (r % 8) of the tile, and signals the box's 1024 bytes.
#[test]
fn tensor_copy_2d_lands_at_swizzled_addresses() {
    let gm = GlobalMemory::new();
    let data = pattern(256 * 16, 7);
    let g = gm.alloc_from("tensor", &data);
    let map = upload_map(&gm, &u8_map(g, [256, 16], 256));
    let out = gm.alloc("out", 1024);
    run(&gm, 32, 1024 + 8, || {
        let (tile, bar) = (smem(), smem() + 1024);
        if tid() == 0 {
            mbarrier::init(bar, 1);
            fence::mbarrier_init();
            mbarrier::arrive_expect_tx(bar, 1024);
            bulk::tensor_global_to_shared(tile, map, &[128, 4], bar);
            mbarrier::try_wait_parity(bar, 0);
            dump_shared(tile, out, 1024);
        }
    });
    let got = read_bytes(&gm, out, 1024);
    for r in 0..8u32 {
        for b in 0..128u32 {
            let want = data[((4 + r) * 256 + 128 + b) as usize];
            assert_eq!(got[sw128_byte(r, b) as usize], want, "row {r} byte {b}");
        }
    }
}

/// Out-of-bounds parts of a box (negative coordinates, and coordinates past the end) are
/// zero-filled, and the copy still completes the full box's bytes: two boxes of a 100 x 6
/// tensor, at (-16, -2) and (64, 3), complete an expect_tx of exactly 2 x 1024 bytes.
#[test]
fn tensor_copy_zero_fills_out_of_bounds_elements() {
    let gm = GlobalMemory::new();
    let (w, h, stride) = (100i32, 6i32, 112usize);
    let data = pattern(stride * h as usize, 2);
    let g = gm.alloc_from("tensor", &data);
    let map = upload_map(&gm, &u8_map(g, [w as u64, h as u64], stride as u64));
    let out = gm.alloc("out", 2048);
    let origins = [(-16, -2), (64, 3)];
    run(&gm, 32, 2048 + 8, || {
        let bar = smem() + 2048;
        if tid() == 0 {
            mbarrier::init(bar, 1);
            fence::mbarrier_init();
            mbarrier::arrive_expect_tx(bar, 2048);
            for (i, &(x, y)) in origins.iter().enumerate() {
                bulk::tensor_global_to_shared(smem() + 1024 * i as u32, map, &[x, y], bar);
            }
            mbarrier::try_wait_parity(bar, 0);
            dump_shared(smem(), out, 2048);
        }
    });
    let got = read_bytes(&gm, out, 2048);
    for (i, &(x0, y0)) in origins.iter().enumerate() {
        for r in 0..8 {
            for b in 0..128 {
                let (x, y) = (x0 + b as i32, y0 + r as i32);
                let inside = (0..w).contains(&x) && (0..h).contains(&y);
                let want = if inside { data[y as usize * stride + x as usize] } else { 0 };
                let at = 1024 * i + sw128_byte(r, b) as usize;
                assert_eq!(got[at], want, "box {i} row {r} byte {b} (element {x}, {y})");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// 7. wgmma
// ---------------------------------------------------------------------------------------

/// Small integers, so every f16 product and f32 sum is exact.
fn a_val(m: u32, k: u32) -> f32 {
    ((m * 3 + k * 5) % 7) as f32 - 3.0
}

fn b_val(n: u32, k: u32) -> f32 {
    ((n * 2 + k * 3 + 1) % 5) as f32 - 2.0
}

/// An initial accumulator value for D(row, col).
fn c_val(row: u32, col: u32) -> f32 {
    (row as f32) * 0.5 - col as f32
}

fn f16(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

/// D = A[64 x k] · B[n x k]ᵀ, row-major 64 x n.
fn matmul(n: u32, k: u32) -> Vec<f32> {
    let mut d = vec![0.0; 64 * n as usize];
    for m in 0..64 {
        for j in 0..n {
            d[(m * n + j) as usize] = (0..k).map(|kk| a_val(m, kk) * b_val(j, kk)).sum();
        }
    }
    d
}

/// sm_90 wgmma descriptor of a K-major 128B-swizzled f16 operand: start, LBO 16 (unused
/// by this layout), SBO 1024 (one 8-row swizzle atom), layout 1 (128B swizzle).
fn desc_sw128(addr: u32) -> u64 {
    ((addr as u64 >> 4) & 0x3FFF) | (1 << 16) | ((1024u64 >> 4) << 32) | (1 << 62)
}

/// Stores A (64 x `k`) at `a` and B (`n` x `k`) at `b` as K-major 128B-swizzled f16 tiles
/// with 128-byte rows (64 values of K), one f16 at a time, spread over 128 threads.
fn store_operands(t: u32, a: u32, b: u32, n: u32, k: u32) {
    for i in (t..64 * k).step_by(128) {
        let (m, kk) = (i / k, i % k);
        memory::st_shared::<u16>(a + sw128_byte(m, 2 * kk), f16(a_val(m, kk)));
    }
    for i in (t..n * k).step_by(128) {
        let (j, kk) = (i / k, i % k);
        memory::st_shared::<u16>(b + sw128_byte(j, 2 * kk), f16(b_val(j, kk)));
    }
}

/// The operands of one SS `mma_async` on k16 step `step`.
fn ss(acc: *mut f32, n: u32, a: u32, b: u32, step: u32, accumulate: bool) -> wgmma::MmaArgs {
    wgmma::MmaArgs {
        accumulators: acc,
        n,
        a: desc_sw128(a + 32 * step),
        desc_b: desc_sw128(b + 32 * step),
        accumulate,
        negate_a: false,
        negate_b: false,
        a_in_registers: false,
        inputs: Default::default(),
    }
}

/// Writes thread `t`'s `n / 2` accumulators to `out` (thread-major).
fn store_acc(out: u64, t: u32, acc: *const f32, n: u32) {
    for v in 0..n / 2 {
        // SAFETY: `acc` addresses `n / 2` live f32s, no wgmma on them is in flight.
        let x = unsafe { acc.add(v as usize).read() };
        memory::st_global::<f32>(out + 4 * (t * n / 2 + v) as u64, x);
    }
}

/// Maps the thread-major accumulator dump back to D (64 x n, row-major) with acc_coord.
fn gather(dump: &[f32], n: u32) -> Vec<f32> {
    let mut d = vec![f32::NAN; 64 * n as usize];
    for t in 0..128 {
        for v in 0..n / 2 {
            let (row, col) = acc_coord(t, v);
            d[(row * n + col) as usize] = dump[(t * n / 2 + v) as usize];
        }
    }
    d
}

#[track_caller]
fn assert_matrix(got: &[f32], want: &[f32], n: u32) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.to_bits() == w.to_bits(), "D[{}][{}] = {g}, expected {w}", i as u32 / n, i as u32 % n);
    }
}

/// SS wgmma m64nNk16 over K = 16 · steps: the first step with scale-d false (the
/// accumulators' initial garbage is ignored), the rest accumulating, all in one group.
fn wgmma_ss_matches_cpu(n: u32, steps: u32) {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "acc", 128 * n as usize / 2 * 4);
    let (a_bytes, b_bytes) = (8 * 1024, n.div_ceil(8) * 1024);
    run(&gm, 128, a_bytes + b_bytes, || {
        let t = tid();
        let (a, b) = (smem(), smem() + a_bytes);
        store_operands(t, a, b, n, 16 * steps);
        fence::proxy_async_shared_cta();
        barrier::sync_all(0);
        let mut acc = vec![12345.0f32; n as usize / 2];
        let p = acc.as_mut_ptr();
        wgmma::fence();
        for step in 0..steps {
            // SAFETY: `acc` outlives the wait below and is not touched before it.
            unsafe { wgmma::mma_async(ss(p, n, a, b, step, step > 0)) };
        }
        wgmma::commit_group();
        wgmma::wait_group(0);
        store_acc(out, t, p, n);
    });
    let d = gather(&read_f32s(&gm, out, 128 * n as usize / 2), n);
    assert_matrix(&d, &matmul(n, 16 * steps), n);
}

/// wgmma SS m64n8k16, one k16 step, against a CPU matmul (every accumulator element).
#[test]
fn wgmma_ss_m64n8k16() {
    wgmma_ss_matches_cpu(8, 1);
}

/// wgmma SS m64n64k16, four chained k16 steps (scale-d false, then true three times)
/// through a 64-wide swizzled tile, against a CPU matmul with K = 64.
#[test]
fn wgmma_ss_m64n64_four_k_steps() {
    wgmma_ss_matches_cpu(64, 4);
}

/// scale-d: with accumulate true D = A·B + D uses the registers' current values (C laid
/// out with acc_coord), with accumulate false the same registers are ignored.
#[test]
fn wgmma_scale_d_adds_the_registers_or_ignores_them() {
    let n = 16;
    let gm = GlobalMemory::new();
    let outs = [zeroed(&gm, "acc+", 128 * 8 * 4), zeroed(&gm, "acc=", 128 * 8 * 4)];
    run(&gm, 128, 8 * 1024 + 2 * 1024, || {
        let t = tid();
        let (a, b) = (smem(), smem() + 8 * 1024);
        store_operands(t, a, b, n, 16);
        fence::proxy_async_shared_cta();
        barrier::sync_all(0);
        for (out, accumulate) in outs.into_iter().zip([true, false]) {
            let mut acc: Vec<f32> = (0..n / 2).map(|v| c_val(acc_coord(t, v).0, acc_coord(t, v).1)).collect();
            let p = acc.as_mut_ptr();
            wgmma::fence();
            // SAFETY: `acc` lives until after the wait.
            unsafe { wgmma::mma_async(ss(p, n, a, b, 0, accumulate)) };
            wgmma::commit_group();
            wgmma::wait_group(0);
            store_acc(out, t, p, n);
        }
    });
    let product = matmul(n, 16);
    let with_c: Vec<f32> = product.iter().enumerate().map(|(i, x)| x + c_val(i as u32 / n, i as u32 % n)).collect();
    assert_matrix(&gather(&read_f32s(&gm, outs[0], 128 * 8), n), &with_c, n);
    assert_matrix(&gather(&read_f32s(&gm, outs[1], 128 * 8), n), &product, n);
}

/// The RS form: A comes from each thread's four registers (laid out by a_frag_coord), B
/// from a swizzled shared tile; m64n16k16 against a CPU matmul.
#[test]
fn wgmma_rs_takes_a_from_registers() {
    let n = 16;
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "acc", 128 * 8 * 4);
    run(&gm, 128, 2 * 1024, || {
        let t = tid();
        let b = smem();
        for i in (t..n * 16).step_by(128) {
            memory::st_shared::<u16>(b + sw128_byte(i / 16, 2 * (i % 16)), f16(b_val(i / 16, i % 16)));
        }
        fence::proxy_async_shared_cta();
        barrier::sync_all(0);
        let regs: Box<[u32; 4]> = Box::new(std::array::from_fn(|reg| {
            let half = |h| {
                let (m, k) = a_frag_coord(t, reg as u32, h);
                f16(a_val(m, k)) as u32
            };
            half(0) | half(1) << 16
        }));
        let mut acc = vec![0.0f32; n as usize / 2];
        let p = acc.as_mut_ptr();
        wgmma::fence();
        let args = wgmma::MmaArgs {
            accumulators: p,
            n,
            a: regs.as_ptr() as u64,
            desc_b: desc_sw128(b),
            accumulate: false,
            negate_a: false,
            negate_b: false,
            a_in_registers: true,
            inputs: Default::default(),
        };
        // SAFETY: `acc` and `regs` live until after the wait and are not touched before it.
        unsafe { wgmma::mma_async(args) };
        wgmma::commit_group();
        wgmma::wait_group(0);
        store_acc(out, t, p, n);
    });
    assert_matrix(&gather(&read_f32s(&gm, out, 128 * 8), n), &matmul(n, 16), n);
}

/// Until a wait_group covers it, an mma_async's accumulators hold ACC_POISON; with two
/// groups in flight wait_group(1) completes only the older (its accumulators are right,
/// the newer's still poisoned) and wait_group(0) the newer.
#[test]
fn wgmma_accumulators_are_poisoned_until_the_wait() {
    let n = 8;
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "acc", 128 * 4 * 4);
    let poisoned = Mutex::new([0u32; 4]);
    run(&gm, 128, 8 * 1024 + 1024, || {
        let t = tid();
        let (a, b) = (smem(), smem() + 8 * 1024);
        store_operands(t, a, b, n, 16);
        fence::proxy_async_shared_cta();
        barrier::sync_all(0);
        let (mut first, mut second) = (vec![1.0f32; 4], vec![2.0f32; 4]);
        let (p1, p2) = (first.as_mut_ptr(), second.as_mut_ptr());
        // SAFETY (all reads below): the arrays are alive; reading an in-flight accumulator
        // is what this test observes (the emulator writes the poison eagerly).
        let all_poison = |p: *mut f32| (0..4).all(|v| unsafe { p.add(v).read() }.to_bits() == wgmma::ACC_POISON);
        let count = |i: usize, yes: bool| poisoned.lock().unwrap()[i] += yes as u32;
        wgmma::fence();
        // SAFETY: both arrays live until the final wait.
        unsafe { wgmma::mma_async(ss(p1, n, a, b, 0, false)) };
        count(0, all_poison(p1));
        wgmma::commit_group();
        // SAFETY: as above.
        unsafe { wgmma::mma_async(ss(p2, n, a, b, 0, true)) };
        wgmma::commit_group();
        wgmma::wait_group(1);
        count(1, all_poison(p2));
        store_acc(out, t, p1, n);
        count(2, all_poison(p1));
        wgmma::wait_group(0);
        count(3, !all_poison(p2) && (0..4).all(|v| unsafe { p2.add(v).read() } == 2.0 + unsafe { p1.add(v).read() }));
    });
    assert_eq!(*poisoned.lock().unwrap(), [128, 128, 0, 128]);
    assert_matrix(&gather(&read_f32s(&gm, out, 128 * 4), n), &matmul(n, 16), n);
}

/// A pipeline without generic writes: A (64 x 64) and B (64 x 64) f16 arrive by 2-D tensor
/// copies with 128B swizzle, and four k16 wgmmas read them with no fence.proxy.async (the
/// copies wrote through the async proxy): the TMA's and the wgmma's swizzles agree.
#[test]
fn wgmma_reads_tiles_delivered_by_tensor_copies() {
    let gm = GlobalMemory::new();
    let to_bytes = |f: fn(u32, u32) -> f32| -> Vec<u8> {
        (0..64 * 64).flat_map(|i| f16(f(i / 64, i % 64)).to_le_bytes()).collect()
    };
    let map = |addr| TensorMap {
        elem_bytes: 2,
        rank: 2,
        global_addr: addr,
        dims: [64, 64, 0, 0, 0],
        strides: [0, 128, 0, 0, 0],
        box_dims: [64, 64, 0, 0, 0],
        elem_strides: [1, 1, 0, 0, 0],
        swizzle: TmaSwizzle::B128,
        oob_fill: OobFill::Zero,
    };
    let a_map = upload_map(&gm, &map(gm.alloc_from("A", &to_bytes(a_val))));
    let b_map = upload_map(&gm, &map(gm.alloc_from("B", &to_bytes(b_val))));
    let out = zeroed(&gm, "acc", 128 * 32 * 4);
    run(&gm, 128, 16 * 1024 + 8, || {
        let t = tid();
        let (a, b, bar) = (smem(), smem() + 8192, smem() + 16384);
        if t == 0 {
            mbarrier::init(bar, 1);
            fence::mbarrier_init();
            mbarrier::arrive_expect_tx(bar, 16384);
            bulk::tensor_global_to_shared(a, a_map, &[0, 0], bar);
            bulk::tensor_global_to_shared(b, b_map, &[0, 0], bar);
        }
        barrier::sync_all(0);
        mbarrier::try_wait_parity(bar, 0);
        let mut acc = vec![0.0f32; 32];
        let p = acc.as_mut_ptr();
        wgmma::fence();
        for step in 0..4 {
            // SAFETY: `acc` lives until after the wait.
            unsafe { wgmma::mma_async(ss(p, 64, a, b, step, step > 0)) };
        }
        wgmma::commit_group();
        wgmma::wait_group(0);
        store_acc(out, t, p, 64);
    });
    assert_matrix(&gather(&read_f32s(&gm, out, 128 * 32), 64), &matmul(64, 64), 64);
}

// ---------------------------------------------------------------------------------------
// 8. Warp collectives
// ---------------------------------------------------------------------------------------

/// elect.sync elects the lowest lane of its membermask: warp 0 with the full mask elects
/// lane 0; in warp 1 only lanes 5..32 execute it (mask 0xFFFF_FFE0) and lane 5 is elected.
#[test]
fn elect_sync_elects_the_lowest_lane_of_the_mask() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 64 * 8);
    run(&gm, 64, 0, || {
        let (t, lane) = (tid(), special::laneid());
        let mask = if t < 32 { u32::MAX } else { 0xFFFF_FFE0 };
        if mask & (1 << lane) != 0 {
            let (elected, me) = warp::elect_sync(mask);
            memory::st_global::<[u32; 2]>(out + 8 * t as u64, [elected, me as u32]);
        }
    });
    let words = read_u32s(&gm, out, 128);
    for t in 0..64u32 {
        let got = [words[2 * t as usize], words[2 * t as usize + 1]];
        let want = match t {
            0..32 => [0, (t == 0) as u32],
            32..37 => [0, 0], // did not execute it
            _ => [5, (t == 37) as u32],
        };
        assert_eq!(got, want, "thread {t}");
    }
}

/// Runs one `shfl.sync.idx` per thread of two warps (value = 10·tid + 1, source lane
/// `src(lane)`) and returns what each thread received.
fn shuffle(src: fn(u32) -> u32) -> Vec<u32> {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 64 * 4);
    run(&gm, 64, 0, || {
        let t = tid();
        let got = warp::shfl_sync_idx(t * 10 + 1, src(special::laneid()));
        memory::st_global::<u32>(out + 4 * t as u64, got);
    });
    read_u32s(&gm, out, 64)
}

/// shfl.sync.idx with a constant source lane broadcasts that lane's value to its warp.
#[test]
fn shfl_sync_idx_broadcasts() {
    let want: Vec<u32> = (0..64).map(|t| (t / 32 * 32 + 7) * 10 + 1).collect();
    assert_eq!(shuffle(|_| 7), want);
}

/// shfl.sync.idx with a per-lane source lane gathers (here a rotation by one); source
/// lanes wrap modulo 32 (clamp 0x1f).
#[test]
fn shfl_sync_idx_gathers_and_wraps() {
    let want: Vec<u32> = (0..64).map(|t| (t / 32 * 32 + (t + 1) % 32) * 10 + 1).collect();
    assert_eq!(shuffle(|lane| lane + 33), want);
}

/// Back-to-back collectives on one warp: each thread gets its own result of each. The
/// last lane to reach the first shfl completes it and runs on into the second before the
/// other lanes have picked up their results.
#[test]
fn back_to_back_shuffles_keep_each_result() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 32 * 8);
    run(&gm, 32, 0, || {
        let t = tid();
        let broadcast = warp::shfl_sync_idx(t * 10 + 1, 7);
        let rotated = warp::shfl_sync_idx(t * 10 + 1, (t + 1) % 32);
        memory::st_global::<[u32; 2]>(out + 8 * t as u64, [broadcast, rotated]);
    });
    let words = read_u32s(&gm, out, 64);
    for t in 0..32u32 {
        assert_eq!(words[2 * t as usize..][..2], [71, (t + 1) % 32 * 10 + 1], "thread {t}");
    }
}

// ---------------------------------------------------------------------------------------
// 9. Numeric instructions and statistics
// ---------------------------------------------------------------------------------------

/// The conversion and f16x2 arithmetic instructions return the models' results and are
/// counted per executed instruction in the launch's statistics (as are loads, stores and
/// barriers).
#[test]
fn numeric_instructions_are_counted() {
    let gm = GlobalMemory::new();
    let out = zeroed(&gm, "out", 64 * 32);
    let stats = emu::launch(&gm, LaunchConfig { grid: [2, 1, 1], block: [32, 1, 1], dynamic_smem: 0 }, || {
        let t = tid() + 32 * special::ctaid()[0];
        let h = numeric::cvt_f16_f32(1.5) as u32; // 0x3E00
        let pair = numeric::cvt_f16x2_f32(2.0, -1.0); // hi 2.0 = 0x4000, lo -1.0 = 0xBC00
        let square = numeric::mul_f16x2(pair, pair); // (4.0, 1.0)
        let fma = numeric::fma_f16x2(square, pair, 0x3C00_3C00); // (4·2+1, 1·-1+1) = (9.0, 0.0)
        let e4m3 = numeric::cvt_f16x2_e4m3x2(0x4038); // (2.0, 1.0)
        memory::st_global::<u32>(out + 32 * t as u64, h);
        memory::st_global::<[u32; 4]>(out + 32 * t as u64 + 16, [pair, square, fma, e4m3]);
        let _ = numeric::cvt_f16_f32(-0.0);
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let words = read_u32s(&gm, out, 64 * 8);
    for t in 0..64 {
        assert_eq!(words[8 * t], 0x3E00, "cvt.rn.f16.f32 of 1.5, thread {t}");
        assert_eq!(words[8 * t + 4..8 * t + 8], [0x4000_BC00, 0x4400_3C00, 0x4880_0000, 0x4000_3C00], "thread {t}");
    }
    let count = |name: &str| stats.instructions.get(name).copied().unwrap_or(0);
    assert_eq!(count("cvt.rn.f16.f32"), 128);
    assert_eq!(count("cvt.rn.f16x2.f32"), 64);
    assert_eq!(count("mul.rn.f16x2"), 64);
    assert_eq!(count("fma.rn.f16x2"), 64);
    assert_eq!(count("cvt.rn.f16x2.e4m3x2"), 64);
    assert_eq!(count("st.global"), 128);
    assert_eq!((stats.ctas, stats.threads), (2, 64));
}
