//! The Hopper v2 kernel (prologue + RS wgmma main kernel) under emulation, against the
//! exact reference on small shapes that exercise every path: M and N tails, L = 3, K = 64
//! (one stage), rings that wrap with and without split K, split tiles with tails, and a
//! second call on the same workspace.

use host::emulate;
use host::generate::{Distribution, generate};
use host::reference::reference;
use host::verify::{compare, unwritten};
use host::{Kernel, Problem};
use kernel::sm90v2::{self, Rows};
use nvfp4::operand::AFormat;

fn problem(shape: &str, dist: Distribution, seed: u64) -> Problem {
    generate(shape.parse().unwrap(), dist, seed)
}

/// Bit-exact on the benchmark's distribution (every partial sum is exact in f32), within
/// tolerance on wide scales, every element written.
fn check(shape: &str, dist: Distribution) {
    check_on(None, shape, dist);
}

/// [`check`] on the tile kind of key `tile` rather than the one the call picks.
fn check_tile(tile: u32, shape: &str, dist: Distribution) {
    check_on(Some(tile), shape, dist);
}

/// [`check`] on the tile kind of key `tile` (`None`: the one the call picks).
fn check_on(tile: Option<u32>, shape: &str, dist: Distribution) {
    let p = problem(shape, dist, 17);
    let what = match tile {
        Some(tile) => format!("sm90v2 tile {tile:#x} on {shape} {dist}"),
        None => format!("sm90v2 on {shape} {dist}"),
    };
    let run = match tile {
        Some(tile) => emulate::run_sm90v2_tile(&p, tile),
        None => emulate::run(&p, Kernel::Sm90v2),
    }
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let c = compare(p.shape, &run.c, &reference(&p));
    assert_eq!(unwritten(&run.c), 0, "{what}: elements left unwritten");
    assert!(c.passed(), "{what}: {c}");
    if dist == Distribution::GpuMode {
        assert!(c.bit_exact, "{what}: not bit-exact: {c}");
    }
}

/// CTAs per split tile of `shape` on the tile kind of key `tile` (an H100 SXM).
fn splits_on(tile: u32, shape: &str) -> u32 {
    let s: nvfp4::Shape = shape.parse().unwrap();
    sm90v2::Plan::on(tile, s.m, s.n, s.k, s.l, SMS).splits()
}

/// What emulation assumes: an H100 SXM's SMs.
const SMS: u32 = host::kernels::H100_SXM_SMS;

fn splits(shape: &str) -> u32 {
    let s: nvfp4::Shape = shape.parse().unwrap();
    sm90v2::splits(s.m, s.n, s.k, s.l, SMS)
}

/// The GEMM entry point (tile height) of `shape` on an H100 SXM.
fn gemm_entry(shape: &str) -> &'static str {
    let s: nvfp4::Shape = shape.parse().unwrap();
    sm90v2::entries(s.m, s.n, s.k, s.l, SMS, AFormat::Nvfp4)[1]
}

#[test]
fn sm90v2_matches_the_reference_under_emulation() {
    // One stage (K = 64) with M and N tails and N odd (2-byte stores); tails in M and N
    // with L = 3; 7 stages in a 6-slot ring (it wraps, the producer refills), one split,
    // on 128-row tiles (M = 300: three, with tails in M and N and L = 2; at M = 128 this
    // short call picks thin tiles, so it also runs on 128-row ones).
    for shape in ["1x1x64", "65x77x64", "129x300x128x3", "128x256x448", "300x300x448x2"] {
        assert_eq!(splits(shape), 1, "{shape}");
        for dist in Distribution::ALL {
            check(shape, dist);
        }
    }
    for shape in ["65x77x64", "128x256x448"] {
        assert_eq!(splits_on(sm90v2::Prefill::TILE, shape), 1, "{shape}");
        check_tile(sm90v2::Prefill::TILE, shape, Distribution::GpuMode);
    }
}

#[test]
fn split_k_tiles_match_the_reference_under_emulation() {
    // Split K: 2 tiles x 8 splits of 8 stages (the ring wraps inside each split), with
    // tails in M and N; and 4 tiles over 2 batches with splits of 4-5 stages.
    for (shape, want) in [("100x260x4096", 8), ("130x200x1152x2", 4)] {
        assert_eq!(splits(shape), want, "{shape}");
        for dist in Distribution::ALL {
            check(shape, dist);
        }
    }
    // 100x260x4096 picks thin tiles (5 x 8 splits of 8 stages, 4 for each warpgroup): on
    // 128-row ones too.
    assert_eq!(gemm_entry("100x260x4096"), "nvfp4_gemm_sm90v2_thin");
    assert_eq!(splits_on(sm90v2::Prefill::TILE, "100x260x4096"), 8);
    check_tile(sm90v2::Prefill::TILE, "100x260x4096", Distribution::GpuMode);
}

/// Short K runs on thin tiles of 64 weight rows, whose two warpgroups take alternate stages
/// and add their sums in shared memory, 128 rows at M = 65..128 and 64 at M = 17..64: 4
/// tiles of 7 stages (4 for warpgroup 0, 3 for warpgroup 1), tails in M and N with L = 3
/// and one stage each, 18 stages through the 8-slot ring (on 8 SMs, where 5 tiles do not
/// split), split K over 8 (64-row tiles here, 128-row ones above); W4A16 in fp16 and bf16
/// (65x77x128, 33x130x80x2, 100x260x4096: below).
#[test]
fn thin_tiles_match_the_reference_under_emulation() {
    for (shape, entry) in [
        ("128x256x448", "nvfp4_gemm_sm90v2_thin"),
        ("100x300x128x3", "nvfp4_gemm_sm90v2_thin"),
        ("64x256x448", "nvfp4_gemm_sm90v2_thin_medium"),
        ("40x300x128x3", "nvfp4_gemm_sm90v2_thin_medium"),
    ] {
        assert_eq!(gemm_entry(shape), entry, "{shape}");
        assert_eq!(splits(shape), 1, "{shape}");
        for dist in Distribution::ALL {
            check(shape, dist);
        }
    }
    let p = problem("100x300x1152", Distribution::GpuMode, 3);
    let s = p.shape;
    assert_eq!(sm90v2::entries(s.m, s.n, s.k, s.l, 8, AFormat::Nvfp4)[1], "nvfp4_gemm_sm90v2_thin");
    assert_eq!(sm90v2::splits(s.m, s.n, s.k, s.l, 8), 1);
    let run = emulate::run_on(&p, Kernel::Sm90v2, 8).unwrap_or_else(|e| panic!("100x300x1152 on 8 SMs: {e}"));
    let c = compare(s, &run.c, &reference(&p));
    assert!(c.bit_exact && unwritten(&run.c) == 0, "100x300x1152 on 8 SMs: {c}");
    assert_eq!(gemm_entry("40x260x4096"), "nvfp4_gemm_sm90v2_thin_medium");
    assert_eq!(splits("40x260x4096"), 8);
    check("40x260x4096", Distribution::GpuMode);
    // Narrow tiles (taken at M = 17..64 only where thin ones would walk more than
    // `SHORT_MAX_STAGES`, shapes too large to emulate in CI), forced here: whole, split,
    // and split with the ring wrapping.
    let narrow = sm90v2::Narrow::TILE;
    // (40x100x4608: one tile in 8 splits of 9 stages, through the 8-slot ring.)
    for (shape, want_splits) in [("64x256x448", 1), ("40x260x4096", 8), ("40x100x4608", 8)] {
        assert_eq!(splits_on(narrow, shape), want_splits, "{shape}");
        check_tile(narrow, shape, Distribution::GpuMode);
    }
    check_w4a16_on(Some(narrow), "33x130x80x2", false, 3, nvfp4::operand::AFormat::Bf16);
}

/// M up to 16 runs on 16-row tiles (`wgmma m64n16`, its own three entry points; at M <=
/// 4 with NVFP4 activations the GEMV runs instead, so those are forced): one row, a full
/// 16 with N tails and L = 2, split K over 16 splits (rings that wrap inside a split) and
/// over 4, W4A16 and an epilogue variant on decode tiles too.
#[test]
fn decode_tiles_match_the_reference_under_emulation() {
    for (shape, want_splits) in [("1x77x64", 1), ("16x300x256x2", 1), ("5x260x4096", 16), ("16x200x1152x2", 4)] {
        assert_eq!(gemm_entry(shape), "nvfp4_gemm_sm90v2_decode", "{shape}");
        assert_eq!(splits(shape), want_splits, "{shape}");
        for dist in Distribution::ALL {
            check_tile(sm90v2::Decode::TILE, shape, dist);
        }
    }
    // (W4A16 calls with K a multiple of 1024 run on the skinny kernel: forced here.)
    check_w4a16_on(Some(sm90v2::Decode::TILE), "1x260x2048", false, 3, nvfp4::operand::AFormat::F16);
    check_w4a16("16x77x80x2", true, 3);
}

/// 17 <= M <= 64 runs on 64-row tiles (`wgmma m64n64`, three entry points of their own)
/// where K is long (shapes too large to emulate in CI pick them; here they are forced): M
/// and N tails with L = 2, a full 64, split K over 8 (rings that wrap inside a split),
/// W4A16 in fp16 and bf16 and an epilogue variant.
#[test]
fn medium_tiles_match_the_reference_under_emulation() {
    let medium = sm90v2::Medium::TILE;
    for (shape, want_splits) in [("17x77x64", 1), ("64x300x256x2", 1), ("40x260x4096", 8)] {
        assert_eq!(splits_on(medium, shape), want_splits, "{shape}");
        for dist in Distribution::ALL {
            check_tile(medium, shape, dist);
        }
    }
    check_w4a16_on(Some(medium), "33x260x2048", false, 3, nvfp4::operand::AFormat::F16);
    check_w4a16_on(Some(medium), "64x77x80x2", true, 4, nvfp4::operand::AFormat::Bf16);
    // With K long enough for no narrow tiles, the tile height switches exactly at 16 / 17,
    // 64 / 65 and 128 / 129 (here the N and K of the benchmark's largest shape).
    let long = |m: u32| sm90v2::entries(m, 7168, 16384, 1, SMS, AFormat::Nvfp4)[1];
    assert_eq!(long(16), "nvfp4_gemm_sm90v2_decode");
    assert_eq!(long(64), "nvfp4_gemm_sm90v2_medium");
    assert_eq!(long(65), "nvfp4_gemm_sm90v2");
    assert_eq!(long(128), "nvfp4_gemm_sm90v2");
    assert_eq!(long(129), "nvfp4_gemm_sm90v2_wide");
    // Above, wide tiles unless the last one would be at most half full.
    for (m, entry) in [
        (256, "nvfp4_gemm_sm90v2_wide"),
        (257, "nvfp4_gemm_sm90v2"),
        (384, "nvfp4_gemm_sm90v2"),
        (385, "nvfp4_gemm_sm90v2_wide"),
        (2304, "nvfp4_gemm_sm90v2_wide"),
    ] {
        assert_eq!(long(m), entry, "M = {m}");
    }
    // Wide, prefill and thin tiles have a bf16 GEMM entry: bf16 activations take it (bf16
    // weights and wgmmas), fp16 activations the main one as NVFP4 activations do; the
    // prologue and reduce are shared. Other tiles have one entry for every format.
    for ((m, n, k), bf16) in [
        ((2304, 4608, 7168), "nvfp4_gemm_sm90v2_wide_bf16"),
        ((128, 7168, 16384), "nvfp4_gemm_sm90v2_bf16"),
        ((128, 7168, 2048), "nvfp4_gemm_sm90v2_thin_bf16"),
        ((64, 7168, 2048), "nvfp4_gemm_sm90v2_thin_medium_bf16"),
    ] {
        let [prepare, gemm, reduce] = sm90v2::entries(m, n, k, 1, SMS, AFormat::Nvfp4);
        assert_eq!(sm90v2::entries(m, n, k, 1, SMS, AFormat::F16), [prepare, gemm, reduce]);
        assert_eq!(sm90v2::entries(m, n, k, 1, SMS, AFormat::Bf16), [prepare, bf16, reduce]);
    }
    for format in [AFormat::F16, AFormat::Bf16] {
        assert_eq!(sm90v2::entries(64, 7168, 16384, 1, SMS, format)[1], "nvfp4_gemm_sm90v2_medium");
    }
}

/// M > 128 runs on 256-row tiles of 128 weight rows (each warpgroup's 64 converted once for
/// both 128-row halves of the activations): M and N tails with L = 3 (one stage), a full
/// 256 over rings that wrap, split K with tails, W4A16 in fp16 and bf16 with an epilogue
/// variant, and rows 129..255 of a partly empty second half.
#[test]
fn wide_tiles_match_the_reference_under_emulation() {
    for (shape, want_splits) in [("129x300x64x3", 1), ("256x260x448", 1), ("200x130x4096", 8)] {
        assert_eq!(gemm_entry(shape), "nvfp4_gemm_sm90v2_wide", "{shape}");
        assert_eq!(splits(shape), want_splits, "{shape}");
        for dist in Distribution::ALL {
            check(shape, dist);
        }
    }
    check_w4a16("400x200x512", true, 5);
    check_w4a16_in("160x77x80x2", false, 6, nvfp4::operand::AFormat::Bf16);
}

/// W4A16 (fp16 A) on `shape`, through the first epilogue variant when `variant`: bit-exact
/// against the exact reference, every element written.
fn check_w4a16(shape: &str, variant: bool, seed: u64) {
    check_w4a16_in(shape, variant, seed, nvfp4::operand::AFormat::F16);
}

/// [`check_w4a16`] with activations in `format` (fp16 or bf16).
fn check_w4a16_in(shape: &str, variant: bool, seed: u64, format: nvfp4::operand::AFormat) {
    check_w4a16_on(None, shape, variant, seed, format);
}

/// [`check_w4a16_in`] on the tile kind of key `tile` (`None`: the one the call picks).
fn check_w4a16_on(tile: Option<u32>, shape: &str, variant: bool, seed: u64, format: nvfp4::operand::AFormat) {
    let mut p = host::generate::generate_w4a16(shape.parse().unwrap(), Distribution::GpuMode, seed, format);
    if variant {
        p.epilogue = host::cli::epilogue_variants(p.shape.n, 4).remove(0);
    }
    let run = match tile {
        Some(tile) => emulate::run_sm90v2_tile(&p, tile),
        None => emulate::run(&p, Kernel::Sm90v2),
    }
    .unwrap_or_else(|e| panic!("{shape}: {e}"));
    let c = compare(p.shape, &run.c, &reference(&p));
    assert_eq!(unwritten(&run.c), 0, "{shape}");
    assert!(c.bit_exact, "{shape}: {c}");
}

#[test]
fn a_second_call_on_the_same_workspace_gives_the_same_result() {
    // Two calls (prologue, GEMM, reduce each) on one workspace: every launch writes what
    // the next reads, so nothing left over from the first call may change the second.
    // On 8 SMs 100x260x4096 runs as 3 tiles x 2 splits.
    two_calls_on_one_workspace(
        "100x260x4096",
        8,
        &["nvfp4_sm90v2_prepare", "nvfp4_gemm_sm90v2", "nvfp4_sm90v2_reduce"],
    );
    // Decode tiles split 16 ways, with their own three entry points (K % 1024 = 512: the
    // skinny kernel does not take it).
    two_calls_on_one_workspace(
        "5x260x4608",
        SMS,
        &["nvfp4_sm90v2_decode_prepare", "nvfp4_gemm_sm90v2_decode", "nvfp4_sm90v2_decode_reduce"],
    );
}

/// Two calls of `shape` on one workspace that starts as garbage (0xFF bytes), decomposed
/// for `sms` SMs: nothing in it may need to start zeroed or stay so between calls.
fn two_calls_on_one_workspace(shape: &str, sms: u32, want_entries: &[&str]) {
    let p = problem(shape, Distribution::GpuMode, 5);
    let shape = p.shape;
    let memory = emu::GlobalMemory::new();
    let workspace_len = sm90v2::workspace_bytes(shape.m, shape.n, shape.k, shape.l, sms) as usize;
    let args = kernel::GemmArgs {
        a: memory.alloc_from("A", &p.a),
        b: memory.alloc_from("B", &p.b),
        sfa: memory.alloc_from("SFA", &p.sfa),
        sfb: memory.alloc_from("SFB", &p.sfb),
        c: memory.alloc("C", shape.c_bytes() as usize),
        workspace: memory.alloc_from("workspace", &vec![0xFF; workspace_len]),
        m: shape.m,
        n: shape.n,
        k: shape.k,
        l: shape.l,
        sms,
        ..kernel::GemmArgs::IDENTITY
    };
    let want = reference(&p);
    let steps = Kernel::Sm90v2.steps(shape, sms, nvfp4::operand::AFormat::Nvfp4);
    let entries: Vec<&str> = steps.iter().map(|s| s.entry).collect();
    assert_eq!(entries, want_entries, "{shape}");
    for call in 0..2 {
        memory.fill(args.c, shape.c_bytes() as usize, 0xFF).unwrap();
        for step in &steps {
            let l = step.launch;
            let config = emu::LaunchConfig { grid: l.grid, block: l.block, dynamic_smem: l.dynamic_smem };
            emu::launch(&memory, config, || (step.body)(&args)).unwrap();
        }
        let mut bytes = vec![0u8; shape.c_bytes() as usize];
        memory.read(args.c, &mut bytes).unwrap();
        let got = host::problem::Output::from_le_bytes(nvfp4::epilogue::OutDtype::F16, &bytes);
        assert_eq!(unwritten(&got), 0, "call {call}");
        assert!(compare(shape, &got, &want).bit_exact, "call {call}");
    }
}

/// The work decomposition of the benchmark shapes and of a wave's edge cases: which tiles
/// split K, over how many CTAs, and the grid that results.
#[test]
fn only_a_part_full_last_wave_splits_its_tiles() {
    // (shape, CTAs per split tile, split tiles, CTAs) on an H100 SXM's 132 SMs
    let cases = [
        ("128x7168x16384", 132, 56, 132), // 56 tiles of 128 weight rows: stream-K (below)
        ("128x4096x7168", 4, 32, 128),
        ("128x7168x2048", 1, 0, 112),   // 112 thin tiles: one wave, none split
        ("2304x4608x7168", 2, 60, 384), // 324 tiles: two whole waves of 132, 60 split in two
        ("256x7168x2048", 1, 0, 112),   // 112 128-row tiles, one wave (56 wide ones would split)
        ("512x4096x7168", 1, 0, 128),   // 128 128-row tiles of 112 stages (wide: 64 x 2)
        ("256x7168x16384", 2, 56, 112), // 56 wide tiles split in two: 256 stages is too long
        ("256x16896x7168", 1, 0, 132),  // 132 tiles: one full wave
        ("256x17152x7168", 8, 2, 148),  // 134: 2 left over, capped at 8 splits
        ("256x33536x7168", 1, 0, 262),  // 262: the last wave 130 of 132 full, stream-K would not pay
        ("256x17152x448", 1, 0, 134),   // 7 stages: too few to split
        ("1x67840x512", 2, 1, 266),     // decode tiles, two per SM: 265 tiles, 1 left over
        // A wave of wide tiles more than half full, with long K: stream-K, 132 CTAs.
        ("512x4608x16384", 132, 72, 132),
        ("1024x2112x16384", 132, 68, 132),
        ("512x4608x7168", 132, 72, 132),
        ("512x4608x4096", 132, 72, 132),
        ("256x11520x14336", 132, 90, 132),
        ("512x4608x2048", 1, 0, 72), // 32 stages: the partials would cost more than the runs save
        // A whole wave, then 92 tiles stream-K.
        ("1024x7168x16384", 132, 92, 264),
        // The same for 128-row tiles.
        ("128x10240x16384", 132, 80, 132),
        ("259x3072x16384", 132, 72, 132),
        ("128x10240x8192", 132, 80, 132),
        ("128x12288x28672", 132, 96, 132),
        // Medium tiles (M = 17..64, long K): stream-K where an even split leaves SMs idle
        // and the runs save more than the extra partials cost (28 tiles: 4 x 28 = 112 CTAs
        // of 64 stages against 132 of 54.3 and 47 more partials), ...
        ("64x7168x16384", 132, 28, 132),
        ("32x7168x28672", 132, 28, 132),
        ("64x14336x16384", 132, 56, 132),
        ("40x20480x16384", 132, 80, 132), // 80 tiles: more than half a wave
        // ... not at half the K (4 x 28 of 32 stages against 132 of 27.2), nor where the
        // even split fills the wave (33 tiles x 4).
        ("64x7168x8192", 4, 28, 112),
        ("64x8448x16384", 4, 33, 132),
        // 128-row tiles the same way, with partials counted at 6 per stage rather than 8:
        // 56 tiles x 2 = 112 CTAs of 128 stages against 132 of 108.6 and 76 more partials,
        // of 96 against 81.5 at three quarters of the K, and 48 tiles x 2 of 64 against
        // 46.5, ... but not 56 tiles x 2 of 64 (against 54.3), nor where the even split
        // fills all but 4 SMs (128x4096x7168 above: 32 tiles x 4).
        ("96x7168x16384", 132, 56, 132),
        ("128x7168x12288", 132, 56, 132),
        ("128x6144x8192", 132, 48, 132),
        ("128x7168x8192", 2, 56, 112),
    ];
    check_decomposition(SMS, &cases);
}

/// The tile height follows M (`sm90v2::rows_for`): 16 rows up to M = 16, 64 up to 64, 128
/// up to 128 (a 128x128 tile splits K as a 256x64 one does and converts each weight half
/// as often), and above, 256 unless that pads M more than 128 would; except that every
/// call in which no SM would walk more than `SHORT_MAX_STAGES` stages of them runs on thin
/// tiles (64 weight rows: 64 rows at M = 17..64, 128 at M = 65..128), and at M = 17..64
/// every other call in which none would walk more than that many of narrow 64-row tiles
/// (128 weight rows) on those; and above M = 128, every call whose wide tiles would split K
/// while 128-row tiles make one wave of unsplit tiles that the cost model of
/// `ONE_WAVE_MAX_STAGES` predicts no slower, on those.
#[test]
fn tile_heights_follow_m() {
    for (shape, want) in [
        ("1x7168x16384", "nvfp4_gemm_sm90v2_decode"),
        ("16x4096x7168", "nvfp4_gemm_sm90v2_decode"),
        ("17x4096x7168", "nvfp4_gemm_sm90v2_narrow"), // 28 stages (thin: 56)
        ("64x7168x16384", "nvfp4_gemm_sm90v2_medium"),
        ("64x7168x2048", "nvfp4_gemm_sm90v2_thin_medium"), // 32 stages, no split
        ("64x4096x7168", "nvfp4_gemm_sm90v2_narrow"),      // 28 (thin: 56)
        ("65x7168x2048", "nvfp4_gemm_sm90v2_thin"),        // 32: the most thin tiles take
        ("128x7168x2048", "nvfp4_gemm_sm90v2_thin"),
        ("128x4096x4096", "nvfp4_gemm_sm90v2_thin"), // 64 tiles x 2 splits of 32 stages
        ("128x7168x4096", "nvfp4_gemm_sm90v2"),      // thin: 64
        ("128x4096x7168", "nvfp4_gemm_sm90v2"),      // thin: 56
        ("128x14336x2048", "nvfp4_gemm_sm90v2"),     // thin: 224 tiles, two waves of 32 stages
        ("128x7168x64", "nvfp4_gemm_sm90v2"),        // one stage: none for warpgroup 1
        ("128x7168x16384", "nvfp4_gemm_sm90v2"),
        ("300x7168x2048", "nvfp4_gemm_sm90v2"), // 300 = 256 + 44: a second wide tile would be 17 % full
        ("384x7168x2048", "nvfp4_gemm_sm90v2"),
        ("512x7168x2048", "nvfp4_gemm_sm90v2_wide"), // 224 128-row tiles: two waves
        ("2304x4608x7168", "nvfp4_gemm_sm90v2_wide"),
        ("256x7168x2048", "nvfp4_gemm_sm90v2"), // wide: 56 tiles x 2 splits; 128-row: 112, one wave
        ("512x4096x7168", "nvfp4_gemm_sm90v2"), // 128 tiles of 112 stages
        ("200x7168x4096", "nvfp4_gemm_sm90v2"), // two 128-row tiles per 128 weight rows: 112, 64 stages
        ("256x7168x16384", "nvfp4_gemm_sm90v2_wide"), // 256 stages: the split wide tiles win
        ("256x4096x7168", "nvfp4_gemm_sm90v2_wide"), // 64 128-row tiles would split too
        ("256x16896x7168", "nvfp4_gemm_sm90v2_wide"), // 132 wide tiles: one wave, none split
        ("256x4352x2048", "nvfp4_gemm_sm90v2"), // wide: 34 tiles x 3 splits; 32 stages
        ("256x5632x2048", "nvfp4_gemm_sm90v2"), // wide: 44 x 3
        ("256x4352x4096", "nvfp4_gemm_sm90v2_wide"), // 64 stages against 22 (x 3)
        ("512x2560x4096", "nvfp4_gemm_sm90v2_wide"), // the same split three ways
    ] {
        assert_eq!(gemm_entry(shape), want, "{shape}");
    }
}

/// Asserts (shape, CTAs per split tile, split tiles, CTAs) on a GPU with `sms` SMs; where
/// the split tiles run stream-K, the "CTAs per split tile" are the wave's CTAs that share
/// them (and every other plan splits its tiles evenly).
fn check_decomposition(sms: u32, cases: &[(&str, u32, u32, u32)]) {
    for &(shape, want_splits, want_split_tiles, want_ctas) in cases {
        let s: nvfp4::Shape = shape.parse().unwrap();
        let (m, n, k, l) = (s.m, s.n, s.k, s.l);
        let stream_k = want_split_tiles > 0 && want_splits == sms.max(1);
        assert_eq!(sm90v2::Plan::new(m, n, k, l, sms).stream_k(), stream_k, "{shape} on {sms} SMs");
        assert_eq!(sm90v2::splits(m, n, k, l, sms), want_splits, "{shape} on {sms} SMs");
        assert_eq!(sm90v2::split_tiles(m, n, k, l, sms), want_split_tiles, "{shape} on {sms} SMs");
        assert_eq!(Kernel::Sm90v2.launch(s, sms).grid[0], want_ctas, "{shape} on {sms} SMs");
    }
}

/// The grid follows the GPU's SM count, not the H100 SXM's: on fewer SMs the same tiles
/// split fewer ways, so that no CTA is left for a second wave.
#[test]
fn other_hoppers_get_a_grid_of_their_own_size() {
    // H100 PCIe, 114 SMs: 32 tiles x 3 instead of x 4 (128 CTAs would need two waves).
    check_decomposition(
        114,
        &[
            ("128x7168x16384", 2, 56, 112),
            ("128x4096x7168", 3, 32, 96),
            ("2304x4608x7168", 1, 0, 324), // 324 = 2 x 114 + 96: the last wave is 84 % full
            ("1x7168x16384", 8, 28, 224),  // decode: 228 CTAs a wave
        ],
    );
    // H20, 78 SMs: 56 tiles fill more than half a wave, so they run stream-K on 78 CTAs
    // (184 stages each, plus 8 + 16 for the partials, predicted against 256 stages), and
    // 32 tiles, which would split in two over 64, too (46 stages each against 56;
    // predictions, not measured on an H20).
    check_decomposition(78, &[("128x7168x16384", 78, 56, 78), ("128x4096x7168", 78, 32, 78)]);
    // No SM count (GemmArgs::IDENTITY) reads as one SM: nothing splits.
    check_decomposition(0, &[("128x7168x16384", 1, 0, 56)]);
}

/// An emulated run decomposed for a GPU of 8 SMs (4 tiles x 2 splits, an even split that
/// fills the wave, where 3 tiles would run stream-K) and of 1 SM (4 whole tiles, one after
/// the other): the same exact result.
#[test]
fn any_sm_count_gives_the_exact_result_under_emulation() {
    let p = problem("100x400x4096", Distribution::GpuMode, 9);
    let want = reference(&p);
    assert!(!sm90v2::Plan::new(p.shape.m, p.shape.n, p.shape.k, p.shape.l, 8).stream_k());
    for (sms, want_ctas) in [(8, 8), (1, 4)] {
        assert_eq!(Kernel::Sm90v2.launch(p.shape, sms).grid[0], want_ctas, "{sms} SMs");
        let run = emulate::run_on(&p, Kernel::Sm90v2, sms).unwrap_or_else(|e| panic!("{sms} SMs: {e}"));
        let c = compare(p.shape, &run.c, &want);
        assert!(c.bit_exact && unwritten(&run.c) == 0, "{sms} SMs: {c}");
    }
}

/// The call on `shape` with A in `format` (NVFP4, or 16-bit: W4A16), decomposed for `sms`
/// SMs, under emulation: bit-exact against the reference, every output written.
fn check_format_on(shape: &str, format: AFormat, seed: u64, sms: u32) {
    let p = match format {
        AFormat::Nvfp4 => problem(shape, Distribution::GpuMode, seed),
        _ => host::generate::generate_w4a16(shape.parse().unwrap(), Distribution::GpuMode, seed, format),
    };
    let run = emulate::run_on(&p, Kernel::Sm90v2, sms).unwrap_or_else(|e| panic!("{format:?}: {e}"));
    let c = compare(p.shape, &run.c, &reference(&p));
    assert!(c.bit_exact && unwritten(&run.c) == 0, "{format:?}: {c}");
}

/// Above M = 128, a call whose wide tiles would split K (on 8 SMs: 4 tiles x 2 splits) runs
/// on one wave of 128-row tiles instead (8 tiles of 16 stages, no split, no reduce launch),
/// with NVFP4 and bf16 activations: the exact result.
#[test]
fn a_one_wave_call_above_m_128_runs_on_128_row_tiles_under_emulation() {
    let (shape, sms) = ("256x512x1024", 8);
    let s: nvfp4::Shape = shape.parse().unwrap();
    assert_eq!(sm90v2::Plan::on(sm90v2::Wide::TILE, s.m, s.n, s.k, s.l, sms).splits(), 2);
    for (format, gemm) in [(AFormat::Nvfp4, "nvfp4_gemm_sm90v2"), (AFormat::Bf16, "nvfp4_gemm_sm90v2_bf16")] {
        let steps = Kernel::Sm90v2.steps(s, sms, format);
        let entries: Vec<&str> = steps.iter().map(|step| step.entry).collect();
        assert_eq!(entries, ["nvfp4_sm90v2_prepare", gemm], "{format:?}");
        check_format_on(shape, format, 11, sms);
    }
}

/// Stream-K's arithmetic on every stream-K plan of a sweep of shapes and SM counts: the
/// runs cover each split tile's stages once, in order, in one or two segments each; the
/// contributors the reduce sums are exactly the runs that touch the tile, in K order, in
/// slots j + t, all inside the workspace's partials.
#[test]
fn stream_k_runs_cover_every_stage_once_and_the_reduce_finds_them() {
    let mut plans = 0;
    for sms in [8, 78, 114, 132] {
        for m in [32, 64, 128, 256, 512, 1024] {
            for n in (128..=20480).step_by(640) {
                for k in [1024, 2048, 4096, 7168, 16384, 28672] {
                    let plan = sm90v2::Plan::new(m, n, k, 1, sms);
                    let d = plan.decomposition();
                    if !d.stream_k {
                        continue;
                    }
                    plans += 1;
                    let stages = sm90v2::k_stages(k);
                    let what = format!("{m}x{n}x{k} on {sms} SMs");
                    // covered[t]: (slot, first stage, end) of each segment in split tile t.
                    let mut covered = vec![Vec::new(); d.split_tiles as usize];
                    for j in 0..d.splits {
                        let (t, begin, end) = d.run(j, stages);
                        assert!(begin < end && t * stages <= begin && begin < (t + 1) * stages, "{what}: run {j}");
                        assert!(end <= (t + 2) * stages && end <= d.split_tiles * stages, "{what}: run {j}");
                        let first_end = end.min((t + 1) * stages);
                        covered[t as usize].push((j + t, begin, first_end));
                        if end > first_end {
                            covered[t as usize + 1].push((j + t + 1, first_end, end));
                        }
                    }
                    for (t, segments) in covered.iter().enumerate() {
                        let t = t as u32;
                        let (slot, count) = d.contributors(t, stages);
                        let slots: Vec<u32> = segments.iter().map(|s| s.0).collect();
                        assert_eq!(slots, (slot..slot + count).collect::<Vec<_>>(), "{what}: tile {t}");
                        assert!(slot + count <= d.partial_slots(), "{what}: tile {t}");
                        let mut at = t * stages;
                        for &(_, begin, end) in segments {
                            assert_eq!(begin, at, "{what}: tile {t}");
                            at = end;
                        }
                        assert_eq!(at, (t + 1) * stages, "{what}: tile {t}");
                    }
                }
            }
        }
    }
    assert!(plans > 100, "only {plans} stream-K plans in the sweep");
}

/// Stream-K on 8 SMs: a last wave of 5 wide tiles after a whole wave (13 tiles), whose 85
/// stages (a quarter-full last one) 8 runs share; the same with 128-row tiles; and one
/// wave of 5 tiles alone. With NVFP4 and bf16 activations (whose prefill and wide entries
/// start warpgroup 1 a stage later): the exact result.
#[test]
fn a_last_wave_more_than_half_full_runs_stream_k_under_emulation() {
    let sms = 8;
    for (shape, ctas, reduce) in [
        ("256x1664x1072", 16, "nvfp4_sm90v2_wide_reduce"),
        ("128x1664x4096", 16, "nvfp4_sm90v2_reduce"),
        ("256x640x4096", 8, "nvfp4_sm90v2_wide_reduce"),
    ] {
        check_stream_k_under_emulation(shape, sms, (5, ctas), reduce);
    }
}

/// Stream-K of medium tiles on 8 SMs: 7 tiles, more than half a wave, whose 896 stages 8
/// runs share (M = 40: rows past M in the tile); 3 tiles, which would split in two over 6
/// CTAs, in 8 runs of 48 stages over 128-stage tiles (3 or 4 contributors a tile); and 3
/// tiles in each of two batches, 8 runs of 48 stages over 64-stage tiles, run 3 going on
/// from batch 0's last tile into batch 1's first. Those runs' segments are whole groups of
/// the four stages medium tiles drain after; in the last shape, 7 tiles of 124 stages in
/// runs of 108-109, the first segment of a run that goes on into the next tile ends on
/// every place of a group (first segments of 16, 93, 78 and 47 stages: 0, 1, 2 or 3 stages
/// past whole groups), so a warpgroup that leaves it holding a slot must release that slot
/// before the second segment, or the producer waits for it forever. With NVFP4 and bf16
/// activations: the exact result.
#[test]
fn medium_tiles_run_stream_k_under_emulation() {
    let sms = 8;
    for (shape, split_tiles) in [("40x1664x8192", 7), ("64x768x8192", 3), ("40x768x4096x2", 6), ("40x1664x7936", 7)] {
        let s: nvfp4::Shape = shape.parse().unwrap();
        assert_eq!(sm90v2::Plan::new(s.m, s.n, s.k, s.l, sms).tile, sm90v2::Medium::TILE, "{shape}");
        check_stream_k_under_emulation(shape, sms, (split_tiles, sms), "nvfp4_sm90v2_medium_reduce");
    }
}

/// Stream-K of 128-row tiles on 8 SMs where the even split would leave SMs idle: 3 tiles
/// (M = 100: rows past M in the tile) that would split in two over 6 CTAs share their 384
/// stages in 8 runs of 48 (two contributors a tile, or three). With NVFP4 and bf16
/// activations: the exact result.
#[test]
fn a_half_empty_wave_of_128_row_tiles_runs_stream_k_under_emulation() {
    let (shape, sms) = ("100x384x8192", 8);
    let s: nvfp4::Shape = shape.parse().unwrap();
    let plan = sm90v2::Plan::new(s.m, s.n, s.k, s.l, sms);
    assert_eq!(plan.tile, sm90v2::Prefill::TILE, "{shape}");
    check_stream_k_under_emulation(shape, sms, (3, sms), "nvfp4_sm90v2_reduce");
}

/// `shape` on `sms` SMs runs stream-K with (split tiles, CTAs) `want` and the reduce entry
/// `reduce`: the exact result under emulation with NVFP4 and bf16 activations.
fn check_stream_k_under_emulation(shape: &str, sms: u32, want: (u32, u32), reduce: &str) {
    let s: nvfp4::Shape = shape.parse().unwrap();
    let plan = sm90v2::Plan::new(s.m, s.n, s.k, s.l, sms);
    assert!(plan.stream_k(), "{shape}");
    assert_eq!((plan.split_tiles(), Kernel::Sm90v2.launch(s, sms).grid[0]), want, "{shape}");
    for format in [AFormat::Nvfp4, AFormat::Bf16] {
        let entries: Vec<&str> = Kernel::Sm90v2.steps(s, sms, format).iter().map(|step| step.entry).collect();
        assert_eq!(entries.last(), Some(&reduce), "{shape} {format:?}");
        check_format_on(shape, format, 13, sms);
    }
}

/// More tiles than a wave holds, and one left over: 264 whole decode tiles, then the last
/// tile split in two (its partials summed by the reduce launch), against the reference.
#[test]
fn a_split_last_wave_after_whole_tiles_matches_the_reference_under_emulation() {
    let shape = "1x67840x512";
    assert_eq!((splits(shape), Kernel::Sm90v2.launch(shape.parse().unwrap(), SMS).grid[0]), (2, 266));
    check_tile(sm90v2::Decode::TILE, shape, Distribution::GpuMode);
}

#[test]
fn unsplit_shapes_need_no_reduce_launch() {
    // 7 stages: too few to split, on thin 64-row and 128-row tiles and 128-row tiles.
    for (shape, want) in [
        ("64x256x448", ["nvfp4_sm90v2_thin_medium_prepare", "nvfp4_gemm_sm90v2_thin_medium"]),
        ("128x256x448", ["nvfp4_sm90v2_thin_prepare", "nvfp4_gemm_sm90v2_thin"]),
        ("300x300x448", ["nvfp4_sm90v2_prepare", "nvfp4_gemm_sm90v2"]),
    ] {
        let steps = Kernel::Sm90v2.steps(shape.parse().unwrap(), SMS, nvfp4::operand::AFormat::Nvfp4);
        let entries: Vec<&str> = steps.iter().map(|s| s.entry).collect();
        assert_eq!(entries, want, "{shape}");
    }
}

/// W4A16: fp16 activations times NVFP4 weights through the same GEMM (the prologue only
/// lays the fp16 values out), bit-exact against the exact reference: tails in M and N,
/// L = 2, K % 64 = 16 (a quarter-full last stage), split K, and an epilogue variant.
#[test]
fn w4a16_fp16_activations_match_the_reference_under_emulation() {
    for (shape, variant) in
        [("65x77x128", false), ("33x130x80x2", false), ("100x260x4096", true), ("129x72x1104", false)]
    {
        check_w4a16(shape, variant, 9);
    }
}

/// W4A16 with bf16 activations: the weights dequantized to fp16 and converted to bf16
/// (exact), bf16 wgmmas, bit-exact against the exact reference: tails in M and N, L = 2,
/// K % 64 = 16, split K with an epilogue variant (M = 100 on thin tiles, M = 300 on three
/// prefill tiles), decode tiles (split K over 16; forced: the call runs on the skinny
/// kernel), and more of prefill tiles' bf16 entry (forced: these short calls pick thin
/// tiles), whose warpgroups run their stage pairs a stage apart, so that one of them ends
/// each unit on a pair's first stage: units of 7 stages (warpgroup 0 ends so) and of 8
/// (warpgroup 1). (Without the release of that held slot the emulator stops 300x260x1152:
/// "ended mid-phase: 128 of 256 arrivals missing".)
#[test]
fn w4a16_bf16_activations_match_the_reference_under_emulation() {
    let bf16 = nvfp4::operand::AFormat::Bf16;
    assert_eq!(gemm_entry("100x260x4096"), "nvfp4_gemm_sm90v2_thin");
    assert_eq!(sm90v2::entries(300, 260, 1152, 1, SMS, bf16)[1], "nvfp4_gemm_sm90v2_bf16");
    for (shape, variant) in
        [("65x77x128", false), ("33x130x80x2", false), ("100x260x4096", true), ("300x260x1152", true)]
    {
        check_w4a16_in(shape, variant, 11, bf16);
    }
    check_w4a16_on(Some(sm90v2::Decode::TILE), "5x260x4096", false, 11, bf16);
    assert_eq!(splits_on(sm90v2::Prefill::TILE, "128x256x448"), 1);
    check_w4a16_on(Some(sm90v2::Prefill::TILE), "128x256x448", false, 11, bf16);
    assert_eq!(splits_on(sm90v2::Prefill::TILE, "100x260x4096"), 8);
    check_w4a16_on(Some(sm90v2::Prefill::TILE), "100x260x4096", true, 11, bf16);
}

/// Each weight pair both element types build, on the host (the `ptx` layer's emulator
/// ops): for every e2m1 code and every finite e4m3 scale (picked out of a word of four scale
/// bytes by `scale_byte_twice`, as the kernels read them), fp16 holds value·sf and bf16
/// value·sf·2^-7 (undone by `Element::UNDO`); and pair i of a weight word holds the same two
/// value positions as pair i of `Element::activations`, in each type's own order.
#[test]
fn both_element_types_build_exact_weight_pairs_in_their_activation_order() {
    use kernel::sm90v2::{Bf16, Element, F16, scale_byte_twice};
    use nvfp4::epilogue::{bf16_to_f32, f16_to_f32};
    // A block's scale byte, picked out of a word of four whose other bytes are not zero.
    fn scale_of(sf: u8) -> u32 {
        let byte = u32::from(sf) % 4;
        let word = 0xA5C3_5A3C & !(0xFF << (8 * byte)) | u32::from(sf) << (8 * byte);
        scale_byte_twice(word, byte)
    }
    fn check<E: Element>(value_of: fn(u16) -> f32, scale_of: fn(u8) -> u32) {
        let half = |pair: u32, h: u32| value_of((pair >> (16 * h)) as u16);
        for sf in (0u8..=0xFE).filter(|&b| !nvfp4::e4m3::is_nan(b)) {
            let scale = E::scale(scale_of(sf));
            for code in 0u8..16 {
                // Every value of word 0 has `code`, every value of word 1 the next code.
                let (c0, c1) = (u64::from(code), u64::from((code + 1) % 16));
                let words = (0..8).fold(0u64, |w, v| w | c0 << (4 * v) | c1 << (32 + 4 * v));
                for i in 0..8u32 {
                    let c = if i < 4 { code } else { (code + 1) % 16 };
                    let want = nvfp4::e2m1::decode(c) * nvfp4::e4m3::decode(sf) / E::UNDO;
                    for h in 0..2 {
                        assert_eq!(half(E::weight(words, i, scale), h), want, "sf {sf:#04x} code {c} pair {i}");
                    }
                }
            }
        }
        // Value v of word 0 has code v; the activations' "values" are their indices.
        let words = 0x7654_3210u64;
        let order = E::activations([0x0001_0000, 0x0003_0002, 0x0005_0004, 0x0007_0006]);
        let unit = E::scale(scale_of(nvfp4::e4m3::encode(1.0)));
        for (i, indices) in order.into_iter().enumerate() {
            for h in 0..2 {
                let want = nvfp4::e2m1::decode((indices >> (16 * h)) as u8) / E::UNDO;
                assert_eq!(half(E::weight(words, i as u32, unit), h), want, "pair {i} half {h}");
            }
        }
    }
    check::<F16>(f16_to_f32, scale_of);
    check::<Bf16>(bf16_to_f32, scale_of);
}

/// An alpha near the top of f32 with bf16 C (whose range is f32's): the powers of two the
/// accumulators carry (2^6 with fp16 weights, 2^7 with bf16 ones) are taken out of each
/// accumulator before alpha, so alpha · 2^7 may overflow f32 while alpha · C does not.
/// NVFP4 and both W4A16 formats on 128-row tiles with split K (the reduce launch's
/// epilogue), and bf16 W4A16 on the skinny kernel (M = 16).
#[test]
fn an_alpha_near_the_top_of_f32_is_not_overflowed_by_the_weights_power_of_two() {
    use nvfp4::epilogue::OutDtype;
    use nvfp4::operand::AFormat;
    let alpha = f32::MAX / 48.0; // alpha · 64 and alpha · 128 are infinite
    let top = host::problem::Epilogue { alpha, alpha_in_memory: false, bias: None, out: OutDtype::Bf16 };
    let cases = [
        (generate("100x260x4096".parse().unwrap(), Distribution::GpuMode, 3), "nvfp4 100x260x4096"),
        (
            host::generate::generate_w4a16("100x260x4096".parse().unwrap(), Distribution::GpuMode, 3, AFormat::F16),
            "fp16",
        ),
        (
            host::generate::generate_w4a16("100x260x4096".parse().unwrap(), Distribution::GpuMode, 3, AFormat::Bf16),
            "bf16",
        ),
        (
            host::generate::generate_w4a16("16x130x2048".parse().unwrap(), Distribution::GpuMode, 3, AFormat::Bf16),
            "skinny",
        ),
    ];
    // Small scales (2^-8, an e4m3 subnormal) keep the products' sums far below 2^128 / alpha.
    let small = nvfp4::e4m3::encode(1.0 / 256.0);
    for (mut p, what) in cases {
        p.epilogue = top.clone();
        p.sfb.iter_mut().for_each(|b| *b = small);
        p.sfa.iter_mut().for_each(|b| *b = small);
        let want = reference(&p);
        let finite = want.bits.iter().filter(|&&b| b & 0x7F80 != 0x7F80).count();
        assert!(
            finite * 4 > want.len() * 3,
            "{what}: the test needs mostly finite products ({finite} of {})",
            want.len()
        );
        let run = emulate::run(&p, Kernel::Sm90v2).unwrap_or_else(|e| panic!("{what}: {e}"));
        let c = compare(p.shape, &run.c, &want);
        assert!(c.bit_exact, "{what}: {c}");
    }
}

/// A reduce thread sums two quads where the reduce launch keeps a CTA for every SM, one
/// elsewhere: 100x400x4096 on 8 SMs (4 tiles x 2 splits, 32 reduce CTAs of two quads, a
/// thread's second quad past M where its first is not) and on 32 SMs (7 tiles stream-K,
/// 56 CTAs of one quad), both exact under emulation; the benchmark's 128x7168x16384 on 132
/// SMs takes two.
#[test]
fn reduce_threads_sum_two_quads_where_the_launch_fills_the_sms() {
    let shape: nvfp4::Shape = "100x400x4096".parse().unwrap();
    for (sms, quads, ctas) in [(8, 2, 32), (32, 1, 56)] {
        let plan = sm90v2::Plan::new(shape.m, shape.n, shape.k, shape.l, sms);
        assert_eq!((plan.reduce_quads(), plan.reduce_launch().grid[0]), (quads, ctas), "{sms} SMs");
        check_format_on("100x400x4096", AFormat::Nvfp4, 17, sms);
    }
    let plan = sm90v2::Plan::new(128, 7168, 16384, 1, SMS);
    assert_eq!((plan.reduce_quads(), plan.reduce_launch().grid[0]), (2, 448));
}
