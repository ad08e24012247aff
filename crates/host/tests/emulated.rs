//! Every kernel, from its own Rust source, run on the CPU emulator against the exact
//! reference on small shapes (the layer CI runs on every commit), and three classic
//! sm90 bugs reintroduced on purpose to show the emulator catches each.

use emu::ErrorKind;
use host::emulate;
use host::generate::{Distribution, generate};
use host::reference::reference;
use host::verify::{compare, unwritten};
use host::{Error, Kernel, Problem};
use kernel::sm90::{self, Variant};

/// sm90 sizes its grid by the tiles alone; the count only fills `GemmArgs::sms`.
const SM90_SMS: u32 = host::kernels::H100_SXM_SMS;

fn problem(shape: &str, dist: Distribution, seed: u64) -> Problem {
    generate(shape.parse().unwrap(), dist, seed)
}

/// Runs `kernel` under emulation and checks it against the reference: bit-exact on the
/// benchmark's distribution (every partial sum is exact in fp32), within tolerance on
/// wide scales.
fn check(kernel: Kernel, shape: &str, dist: Distribution) {
    let p = problem(shape, dist, 7);
    let run = emulate::run(&p, kernel).unwrap_or_else(|e| panic!("{kernel} on {shape}: {e}"));
    let want = reference(&p);
    let c = compare(p.shape, &run.c, &want);
    assert_eq!(unwritten(&run.c), 0, "{kernel} {shape} {dist}: elements left unwritten");
    assert!(c.passed(), "{kernel} {shape} {dist}: {c}");
    if dist == Distribution::GpuMode {
        assert!(c.bit_exact, "{kernel} {shape} {dist}: not bit-exact: {c}");
    }
}

#[test]
fn naive_matches_the_reference_under_emulation() {
    for shape in ["128x256x128", "1x1x64", "100x130x192x3"] {
        for dist in Distribution::ALL {
            check(Kernel::Naive, shape, dist);
        }
    }
}

#[test]
fn sm90_matches_the_reference_under_emulation() {
    // A whole tile, a single element, tails in M and N with L = 3, odd N (no pair stores),
    // and more k-steps than pipeline stages (the rings wrap).
    for shape in ["128x256x256", "1x1x64", "129x136x128x3", "65x77x64", "128x128x640"] {
        for dist in Distribution::ALL {
            check(Kernel::Sm90, shape, dist);
        }
    }
}

/// Runs an sm90 variant on a small problem; returns the emulator's verdict.
fn run_variant<V: Variant>(p: &Problem) -> Result<emulate::EmulatedRun, Error> {
    emulate::run_body(p, SM90_SMS, sm90::launch(p.shape.m, p.shape.n, p.shape.l), sm90::gemm::<V>)
}

fn emulator_error(result: Result<emulate::EmulatedRun, Error>) -> emu::EmuError {
    match result {
        Err(Error::Emulator(e)) => e,
        Err(other) => panic!("expected an emulator report, got: {other}"),
        Ok(_) => panic!("the broken kernel ran without a report"),
    }
}

/// The consumers release a stage before their wgmmas on it completed: the dequantizer's
/// next stores hit shared memory an in-flight wgmma still reads.
struct DropWgmmaWait;
impl Variant for DropWgmmaWait {
    const DROP_WGMMA_WAIT: bool = true;
}

#[test]
fn emulator_catches_a_dropped_wgmma_wait() {
    let p = problem("128x128x512", Distribution::GpuMode, 1);
    let e = emulator_error(run_variant::<DropWgmmaWait>(&p));
    assert_eq!(e.kind, ErrorKind::InFlightRead, "{e}");
    assert!(e.message.contains("missing wgmma.wait_group"), "{e}");
    assert!(e.location.is_some_and(|l| l.file().ends_with("sm90.rs")), "the report names the kernel line: {e}");
}

/// The dequantizer's generic-proxy stores reach the tensor cores' async proxy unfenced.
struct DropProxyFence;
impl Variant for DropProxyFence {
    const DROP_PROXY_FENCE: bool = true;
}

#[test]
fn emulator_catches_a_dropped_proxy_fence() {
    let p = problem("128x128x128", Distribution::GpuMode, 1);
    let e = emulator_error(run_variant::<DropProxyFence>(&p));
    assert_eq!(e.kind, ErrorKind::MissingProxyFence, "{e}");
    assert!(e.message.contains("fence.proxy.async"), "{e}");
    assert!(e.message.contains("sm90.rs"), "the report names the store that was not fenced: {e}");
}

/// Every A descriptor starts 16 bytes late: a legal descriptor, wrong data. The last
/// 16 bytes that the second consumer warpgroup reads lie in the next fp16 stage, which
/// the dequantizer fills with nothing ordering the two: a data race, reported first.
struct ShiftedDescriptor;
impl Variant for ShiftedDescriptor {
    const A_DESCRIPTOR_SHIFT: u32 = 16;
}

#[test]
fn emulator_catches_a_descriptor_shifted_by_16_bytes() {
    let p = problem("128x128x128", Distribution::GpuMode, 1);
    let e = emulator_error(run_variant::<ShiftedDescriptor>(&p));
    assert_eq!(e.kind, ErrorKind::DataRace, "{e}");
    assert!(e.message.contains("wgmma of warpgroup 2"), "{e}");
    assert!(e.location.is_some_and(|l| l.file().ends_with("sm90.rs")), "the report names the kernel line: {e}");
    // Without the race detector, it breaks no other rule, only the result.
    let options = emu::Options { detect_races: false, ..emu::Options::default() };
    let launch = sm90::launch(p.shape.m, p.shape.n, p.shape.l);
    let run = emulate::run_body_with(&p, SM90_SMS, launch, &options, sm90::gemm::<ShiftedDescriptor>)
        .expect("a shifted descriptor breaks no other rule");
    let c = compare(p.shape, &run.c, &reference(&p));
    assert!(!c.passed(), "the shifted descriptor went unnoticed: {c}");
    assert!(c.mismatches > p.shape.m as u64 * p.shape.n as u64 / 2, "most outputs should be wrong: {c}");
    // The correct kernel on the same input is bit-exact.
    let good = run_variant::<sm90::Correct>(&p).unwrap();
    assert!(compare(p.shape, &good.c, &reference(&p)).bit_exact);
}

/// The sm90 kernel under seeded random schedules (threads preempted at random
/// instructions, woken in random order): no schedule may change a bit of the output or
/// expose a data race. The shape wraps both rings and has tails in M and N.
#[test]
fn sm90_is_race_free_and_bit_exact_under_seeded_schedules() {
    let p = problem("65x77x384", Distribution::GpuMode, 5);
    let want = reference(&p);
    let launch = sm90::launch(p.shape.m, p.shape.n, p.shape.l);
    for seed in 0..4 {
        let options = emu::Options { seed: Some(seed), ..emu::Options::default() };
        let run = emulate::run_body_with(&p, SM90_SMS, launch, &options, sm90::gemm::<sm90::Correct>)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let c = compare(p.shape, &run.c, &want);
        assert!(c.bit_exact, "seed {seed}: not bit-exact: {c}");
    }
}

/// Every kernel through each epilogue variant (alpha by value and from memory, a bias,
/// bf16 out), bit-exact against the reference's fp32 epilogue on the benchmark's
/// distribution; the split-K shapes run the epilogue in sm90v2's reduce launch and in
/// sm100's last-CTA fix-up.
#[test]
fn every_kernel_applies_alpha_bias_and_bf16_like_the_reference() {
    let cases = [
        (Kernel::Naive, "65x77x128x2"),
        (Kernel::Sm90, "129x136x128"),
        (Kernel::Sm90v2, "65x77x128"),
        (Kernel::Sm90v2, "100x260x4096"),
        (Kernel::Sm100, "129x136x128"),
        (Kernel::Sm100, "100x130x4096"),
    ];
    for (kernel, shape) in cases {
        let base = problem(shape, Distribution::GpuMode, 11);
        for epilogue in host::cli::epilogue_variants(base.shape.n, 3) {
            let what = format!("{kernel} {shape} {}", epilogue.describe());
            let p = Problem { epilogue, ..base.clone() };
            let run = emulate::run(&p, kernel).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = reference(&p);
            assert_eq!(run.c.dtype, p.epilogue.out, "{what}");
            assert_eq!(unwritten(&run.c), 0, "{what}: elements left unwritten");
            let c = compare(p.shape, &run.c, &want);
            assert!(c.bit_exact, "{what}: {c}");
        }
    }
}

/// Any K that is a multiple of 16: K = 96 (rows 16-byte aligned, a half-full last stage)
/// and K = 80 and 16 (rows only 8-byte aligned: the copies go 8 bytes at a time), with
/// tails in M and N and L = 2. The blocked layout's padding scales are set to 1.0 instead
/// of the usual zero, so the bytes past K (the next row's values) would count if a kernel
/// did not zero-fill them.
#[test]
fn every_kernel_takes_any_k_that_is_a_multiple_of_16() {
    use nvfp4::layout;
    let one = nvfp4::e4m3::encode(1.0);
    for shape in ["65x77x96x2", "33x130x80x2", "129x72x16", "100x260x1104"] {
        for dist in Distribution::ALL {
            let mut p = problem(shape, dist, 13);
            let s = p.shape;
            let sf_cols = s.sf_cols();
            let padded_cols = layout::col_blocks(sf_cols) * layout::TILE_COLS;
            assert!(padded_cols > sf_cols, "{shape}: no padding to poison");
            for (blocked, rows) in [(&mut p.sfa, s.m), (&mut p.sfb, s.n)] {
                let batch = layout::batch_bytes(rows, sf_cols);
                for l in 0..s.l as u64 {
                    for r in 0..rows {
                        for j in sf_cols..padded_cols {
                            blocked[(l * batch + layout::offset(r, j, sf_cols)) as usize] = one;
                        }
                    }
                }
            }
            let want = reference(&p);
            for kernel in Kernel::ALL {
                let run = emulate::run(&p, kernel).unwrap_or_else(|e| panic!("{kernel} {shape}: {e}"));
                let c = compare(s, &run.c, &want);
                assert_eq!(unwritten(&run.c), 0, "{kernel} {shape} {dist}");
                assert!(c.passed(), "{kernel} {shape} {dist}: {c}");
                if dist == Distribution::GpuMode {
                    assert!(c.bit_exact, "{kernel} {shape} {dist}: {c}");
                }
            }
        }
    }
}
