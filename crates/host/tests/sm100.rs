//! The Blackwell kernel under emulation, the only place it runs here: against the exact
//! reference on small shapes that exercise every path (tails in M, N and K, L > 1, rings
//! that wrap, both accumulators, odd 64-row B tiles), and the three classic tcgen05 bugs
//! the design notes rank first, each reintroduced through `sm100::Variant` and caught.

use emu::ErrorKind;
use host::emulate;
use host::generate::{Distribution, generate};
use host::reference::reference;
use host::verify::{compare, unwritten};
use host::{Error, Kernel, Problem};
use kernel::sm100::{self, Variant};

/// What emulating sm100 assumes: a B200's SMs.
const SMS: u32 = host::kernels::B200_SMS;

fn problem(shape: &str, dist: Distribution, seed: u64) -> Problem {
    generate(shape.parse().unwrap(), dist, seed)
}

/// Bit-exact on the benchmark's distribution (every partial sum is exact in f32), within
/// tolerance on wide scales, every element written.
fn check(shape: &str, dist: Distribution) {
    let p = problem(shape, dist, 17);
    let run = emulate::run(&p, Kernel::Sm100).unwrap_or_else(|e| panic!("sm100 on {shape} {dist}: {e}"));
    let want = reference(&p);
    let c = compare(p.shape, &run.c, &want);
    assert_eq!(unwritten(&run.c), 0, "sm100 {shape} {dist}: elements left unwritten");
    assert!(c.passed(), "sm100 {shape} {dist}: {c}");
    if dist == Distribution::GpuMode {
        assert!(c.bit_exact, "sm100 {shape} {dist}: not bit-exact: {c}");
    }
}

#[test]
fn sm100_matches_the_reference_under_emulation() {
    // A whole 128x128 tile pair at K = 256 (one full stage); K = 64 (one MMA, a partial
    // stage); M and N tails with L = 3; N not a multiple of 8 (no vector stores); more
    // K stages than the ring holds (it wraps) with several tiles per accumulator lap.
    // K split across 2 and 4 CTAs (one tile, 9 stages; three tiles with tails, 16 stages).
    for shape in ["128x128x256", "1x1x64", "129x136x192x3", "65x77x64", "128x64x2304", "256x320x576", "100x130x4096"] {
        for dist in Distribution::ALL {
            check(shape, dist);
        }
    }
}

#[test]
fn persistent_ctas_walk_several_tiles_through_both_accumulators() {
    // 2 CTAs for 10 tiles: each CTA runs 5 tiles, so both accumulators go round more than
    // once and the stage ring wraps across tile boundaries.
    let p = problem("256x320x576", Distribution::GpuMode, 3);
    let launch = kernel::Launch { grid: [2, 1, 1], ..sm100::launch(p.shape.m, p.shape.n, p.shape.k, p.shape.l, SMS) };
    let run = emulate::run_body(&p, SMS, launch, sm100::gemm::<sm100::Correct>).unwrap();
    let c = compare(p.shape, &run.c, &reference(&p));
    assert!(c.bit_exact, "{c}");
}

#[test]
fn split_k_counters_are_left_zero_for_the_next_launch() {
    // Two launches on the same workspace: the second must see zeroed counters and give the
    // same, exact result.
    let p = problem("100x130x4096", Distribution::GpuMode, 5);
    let shape = p.shape;
    assert_eq!(sm100::splits(shape.m, shape.n, shape.k, shape.l, SMS), 4, "the shape must split K");
    let memory = emu::GlobalMemory::new();
    let workspace_len = sm100::workspace_bytes(shape.m, shape.n, shape.k, shape.l, SMS) as usize;
    let args = kernel::GemmArgs {
        a: memory.alloc_from("A", &p.a),
        b: memory.alloc_from("B", &p.b),
        sfa: memory.alloc_from("SFA", &p.sfa),
        sfb: memory.alloc_from("SFB", &p.sfb),
        c: memory.alloc("C", shape.c_bytes() as usize),
        workspace: memory.alloc_from("workspace", &vec![0; workspace_len]),
        m: shape.m,
        n: shape.n,
        k: shape.k,
        l: shape.l,
        sms: SMS,
        ..kernel::GemmArgs::IDENTITY
    };
    let l = sm100::launch(shape.m, shape.n, shape.k, shape.l, SMS);
    let config = emu::LaunchConfig { grid: l.grid, block: l.block, dynamic_smem: l.dynamic_smem };
    let want = reference(&p);
    for launch in 0..2 {
        memory.fill(args.c, shape.c_bytes() as usize, 0xFF).unwrap();
        emu::launch(&memory, config, || sm100::gemm::<sm100::Correct>(&args)).unwrap();
        let mut bytes = vec![0u8; shape.c_bytes() as usize];
        memory.read(args.c, &mut bytes).unwrap();
        let got = host::problem::Output::from_le_bytes(nvfp4::epilogue::OutDtype::F16, &bytes);
        assert!(compare(shape, &got, &want).bit_exact, "launch {launch}");
        let mut counters = vec![0u8; 256];
        memory.read(args.workspace, &mut counters).unwrap();
        assert!(counters.iter().all(|&b| b == 0), "launch {launch} left a split-K counter set");
    }
}

/// Under seeded random schedules (threads preempted at random instructions, woken in
/// random order) no schedule may change a bit of the output or expose a data race: two
/// persistent CTAs over 5 tiles each (both accumulators, the ring wrapping), and a K split
/// in four.
#[test]
fn sm100_is_race_free_and_bit_exact_under_seeded_schedules() {
    for (shape, grid) in [("256x320x576", Some(2)), ("100x130x4096", None)] {
        let p = problem(shape, Distribution::GpuMode, 9);
        let want = reference(&p);
        let mut launch = sm100::launch(p.shape.m, p.shape.n, p.shape.k, p.shape.l, SMS);
        if let Some(g) = grid {
            launch.grid = [g, 1, 1];
        }
        for seed in 0..4 {
            let options = emu::Options { seed: Some(seed), ..emu::Options::default() };
            let run = emulate::run_body_with(&p, SMS, launch, &options, sm100::gemm::<sm100::Correct>)
                .unwrap_or_else(|e| panic!("{shape} seed {seed}: {e}"));
            let c = compare(p.shape, &run.c, &want);
            assert!(c.bit_exact, "{shape} seed {seed}: not bit-exact: {c}");
        }
    }
}

/// Runs an sm100 variant on a small problem; returns the emulator's verdict.
fn run_variant<V: Variant>(p: &Problem) -> Result<emulate::EmulatedRun, Error> {
    emulate::run_body(p, SMS, sm100::launch(p.shape.m, p.shape.n, p.shape.k, p.shape.l, SMS), sm100::gemm::<V>)
}

fn emulator_error(result: Result<emulate::EmulatedRun, Error>) -> emu::EmuError {
    match result {
        Err(Error::Emulator(e)) => e,
        Err(other) => panic!("expected an emulator report, got: {other}"),
        Ok(_) => panic!("the broken kernel ran without a report"),
    }
}

/// Bug 1: the `kind::f16` instruction descriptor's D-type bits copied into the block-scaled
/// descriptor, where bits 4-5 are the B scale-factor ID (illegal for scale_vec::4X).
struct F16KindDescriptor;
impl Variant for F16KindDescriptor {
    const F16_KIND_IDESC_BITS: bool = true;
}

#[test]
fn emulator_catches_wrong_instruction_descriptor_bits() {
    let p = problem("128x64x256", Distribution::GpuMode, 1);
    let e = emulator_error(run_variant::<F16KindDescriptor>(&p));
    assert!(e.to_string().contains("scale"), "the report names the scale-factor ID field: {e}");
    assert!(e.location.is_some_and(|l| l.file().ends_with("sm100.rs")), "the report names the kernel line: {e}");
}

/// Bug 2: the producers' cp.async data reaches the tensor core's async proxy unfenced.
struct DropProxyFence;
impl Variant for DropProxyFence {
    const DROP_PROXY_FENCE: bool = true;
}

#[test]
fn emulator_catches_a_dropped_proxy_fence() {
    let p = problem("128x64x256", Distribution::GpuMode, 1);
    let e = emulator_error(run_variant::<DropProxyFence>(&p));
    assert_eq!(e.kind, ErrorKind::MissingProxyFence, "{e}");
    assert!(e.message.contains("fence.proxy.async"), "{e}");
}

/// Bug 3: wrong scale-factor columns: an odd 64-row B tile reads the scales of rows 0-63
/// of its 128-row scale tile instead of rows 64-127. Legal, silently wrong.
struct SfbRowOffsetForgotten;
impl Variant for SfbRowOffsetForgotten {
    const SFB_ROW_OFFSET_FORGOTTEN: bool = true;
}

#[test]
fn emulator_catches_wrong_scale_factor_columns() {
    let p = problem("128x128x256", Distribution::Wide, 1);
    let run = run_variant::<SfbRowOffsetForgotten>(&p).expect("wrong columns break no rule, only the result");
    let c = compare(p.shape, &run.c, &reference(&p));
    assert!(!c.passed(), "the wrong scale columns went unnoticed: {c}");
    // Only the second 64-column tile is affected, and most of it.
    assert!(c.mismatches > 128 * 64 / 2, "most outputs of the odd tile should be wrong: {c}");
    let good = run_variant::<sm100::Correct>(&p).unwrap();
    assert!(compare(p.shape, &good.c, &reference(&p)).passed());
}
