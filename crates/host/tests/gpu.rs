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
                let emulated = emulate::run_on(&p, k, gpu.info.multiprocessors).unwrap().c;
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

/// The library call on caller memory: buffers allocated by the caller, a stream of its own
/// (not the default one), alpha read from GPU memory, a bias, bf16 out; two calls in a row
/// on one workspace; the result equals the reference bit for bit.
#[test]
#[ignore = "needs an NVIDIA GPU with the CUDA 13 driver"]
fn the_api_runs_on_caller_memory_and_stream() {
    use cudarc::driver::DevicePtr;
    use host::api::{Alpha, Epilogue, Gemms, Operands};
    use host::problem::Output;
    use nvfp4::epilogue::OutDtype;

    let gemms = Gemms::for_device(0).unwrap();
    assert!(std::sync::Arc::ptr_eq(&gemms, &Gemms::for_device(0).unwrap()), "loaded once per device");
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    for shape in ["128x7168x2048", "100x200x320x2", "128x4096x7168"] {
        let mut p = generate(shape.parse().unwrap(), Distribution::GpuMode, 21);
        let bias = host::generate::bias(p.shape.n, OutDtype::Bf16, 2);
        p.epilogue = host::problem::Epilogue {
            alpha: 0.75,
            alpha_in_memory: true,
            bias: Some(bias.clone()),
            out: OutDtype::Bf16,
        };
        let want = reference(&p);
        let up = |v: &[u8]| stream.clone_htod(v).unwrap();
        let (a, b, sfa, sfb) = (up(&p.a), up(&p.b), up(&p.sfa), up(&p.sfb));
        let alpha = stream.clone_htod(&[0.75f32]).unwrap();
        let bias = stream.clone_htod(&bias).unwrap();
        let mut c = stream.alloc_zeros::<u16>(p.shape.c_bytes() as usize / 2).unwrap();
        let workspace = stream.alloc_zeros::<u8>(gemms.workspace_bytes(p.shape).max(1) as usize).unwrap();
        let ptr = |x: &cudarc::driver::CudaSlice<u8>| x.device_ptr(&stream).0;
        let ops = Operands {
            a: ptr(&a),
            b: ptr(&b),
            sfa: ptr(&sfa),
            sfb: ptr(&sfb),
            c: c.device_ptr(&stream).0,
            a_format: host::api::AFormat::Nvfp4,
        };
        let epilogue = Epilogue {
            alpha: Alpha::Device(alpha.device_ptr(&stream).0),
            bias: bias.device_ptr(&stream).0,
            out: OutDtype::Bf16,
        };
        for call in 0..2 {
            stream.memcpy_htod(&vec![OutDtype::Bf16.poison(); c.len()], &mut c).unwrap();
            // SAFETY: every buffer above has the sizes the shape implies and outlives the call.
            unsafe { gemms.enqueue(stream.cu_stream(), &ops, p.shape, &epilogue, ptr(&workspace)) }.unwrap();
            stream.synchronize().unwrap();
            let got = Output { dtype: OutDtype::Bf16, bits: stream.clone_dtoh(&c).unwrap() };
            let cmp = compare(p.shape, &got, &want);
            assert!(cmp.bit_exact && unwritten(&got) == 0, "{} {shape} call {call}: {cmp}", gemms.kernel());
        }
    }
}
