//! GPU tests: every kernel this GPU runs against the exact reference with the output
//! poisoned first, and the emulator's fidelity (same kernel source, same inputs:
//! bit-identical output on the benchmark's distribution). Ignored by default; run them on
//! a GPU machine with `cargo test --release -p host --test gpu -- --ignored`.

use host::generate::{Distribution, generate};
use host::probes::{GpuProbes, PROBES, Side, check, table};
use host::reference::reference;
use host::verify::{compare, unwritten};
use host::{Gemm, Gpu, Kernel, emulate};

fn gpu() -> Gpu {
    Gpu::open(0).expect("these tests need a GPU")
}

#[test]
#[ignore = "needs an NVIDIA GPU with the CUDA 13 driver"]
fn every_kernel_matches_the_reference_on_the_correctness_shapes() {
    let gpu = gpu();
    let kernels: Vec<Kernel> = Kernel::ALL.into_iter().filter(|k| k.runs_on(gpu.info.compute_capability)).collect();
    assert!(!kernels.is_empty());
    let shapes = host::cli::CORRECTNESS_SHAPES.iter().chain(host::cli::ODD_SHAPES.iter());
    for shape in shapes {
        for dist in Distribution::ALL {
            let p = generate(shape.parse().unwrap(), dist, 11);
            let want = reference(&p);
            for &k in &kernels {
                let gemm = Gemm::new(&gpu, k).unwrap();
                let got = gemm.run(&mut gemm.upload(&p).unwrap()).unwrap(); // poisons C first
                let c = compare(p.shape, &got, &want);
                assert_eq!(unwritten(&got), 0, "{k} {shape} {dist}");
                assert!(c.passed(), "{k} {shape} {dist}: {c}");
                if dist == Distribution::GpuMode {
                    assert!(c.bit_exact, "{k} {shape} {dist}: {c}");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with the CUDA 13 driver"]
fn emulator_and_gpu_agree_bit_for_bit() {
    let gpu = gpu();
    for k in Kernel::ALL.into_iter().filter(|k| k.runs_on(gpu.info.compute_capability)) {
        for shape in host::cli::EMULATOR_SHAPES {
            for dist in Distribution::ALL {
                let p = generate(shape.parse().unwrap(), dist, 5);
                let gemm = Gemm::new(&gpu, k).unwrap();
                let on_gpu = gemm.run(&mut gemm.upload(&p).unwrap()).unwrap();
                let emulated = emulate::run(&p, k).unwrap().c;
                let between = compare(p.shape, &on_gpu, &emulated);
                match dist {
                    Distribution::GpuMode => {
                        assert!(between.bit_exact, "{k} {shape} {dist}: GPU and emulator differ: {between}")
                    }
                    Distribution::Wide => assert!(between.max_ulps <= 1, "{k} {shape} {dist}: {between}"),
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with the CUDA 13 driver"]
fn instruction_probes_agree_on_the_gpu_the_emulator_and_the_expected_values() {
    let gpu = gpu();
    let mut probes = GpuProbes::new(&gpu);
    let results: Vec<_> = PROBES.iter().map(|p| check(p, Some(&mut probes))).collect();
    let report = table(&results);
    assert!(results.iter().all(|r| r.passed), "{report}");
    assert!(results.iter().any(|r| matches!(r.gpu, Side::Ran { .. })), "no probe ran on this GPU:\n{report}");
}
