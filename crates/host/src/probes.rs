//! Hardware probes (`host selftest --probes`): one tiny kernel per instruction family the
//! emulator models, run on the GPU and under the emulator, both compared with an expected
//! value computed here in plain Rust from the PTX ISA's definitions (never by the
//! emulator).
//!
//! On a GPU each probe gives three verdicts: GPU == expected, emulator == expected, GPU ==
//! emulator. A probe whose PTX target the GPU cannot run (wgmma on Blackwell, tcgen05 on
//! Hopper) is reported as skipped, not failed; so is an emulator model that does not exist
//! yet (`unimplemented!`). The kernels and the layouts of their inputs and outputs are in
//! `kernel::probes`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use cudarc::driver::{CudaModule, DevicePtr, LaunchConfig, PushKernelArg};
use kernel::Launch;
use kernel::probes::{self as k, ProbeArgs};

use crate::device::Gpu;
use crate::embedded;
use crate::error::{CudaContext as _, Error, Result};

/// What the output buffer holds before a probe runs: every byte 0xCD, so an unwritten
/// byte shows.
pub const POISON: u8 = 0xCD;

/// One probe: its kernel, data, and expected output.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// Short name (the table's first column).
    pub name: &'static str,
    /// `.entry` name in the PTX.
    pub entry: &'static str,
    /// What it checks, in one line.
    pub checks: &'static str,
    /// The embedded PTX builds that contain it (`sm90a`, `sm100a`).
    pub targets: &'static [&'static str],
    pub launch: Launch,
    pub output_bytes: usize,
    /// The kernel body, as the emulator runs it.
    pub body: fn(&ProbeArgs),
    /// The input bytes.
    pub input: fn() -> Vec<u8>,
    /// The expected output, from the input.
    pub expected: fn(&[u8]) -> Vec<u8>,
    /// Names what output byte `i` holds (for the mismatch report).
    pub locate: fn(usize) -> String,
    /// `aux` is the [`tma_map`] tensor map over the input.
    pub tensor_map: bool,
}

/// Every probe, Hopper families first.
pub const PROBES: [Probe; 8] = [
    Probe {
        name: "cvt",
        entry: "probe_cvt",
        checks: "cvt.rn.f16x2.e4m3x2 on all 256 bytes; cvt.rn.f16x2.f32 and cvt.rn.f16.f32 on ties, subnormals, overflow, NaN",
        targets: &["sm90a", "sm100a"],
        launch: k::cvt::LAUNCH,
        output_bytes: k::cvt::OUTPUT_BYTES as usize,
        body: k::cvt::probe,
        input: cvt_input,
        expected: cvt_expected,
        locate: cvt_locate,
        tensor_map: false,
    },
    Probe {
        name: "cp_async",
        entry: "probe_cp_async",
        checks: "cp.async.cg 16 B / .ca 4 B with src_size 0..16 (zero fill, untouched tail), wait_group 1, 0, mbarrier.arrive.noinc",
        targets: &["sm90a", "sm100a"],
        launch: k::cp_async::LAUNCH,
        output_bytes: k::cp_async::OUTPUT_BYTES as usize,
        body: k::cp_async::probe,
        input: cp_async_input,
        expected: cp_async_expected,
        locate: cp_async_locate,
        tensor_map: false,
    },
    Probe {
        name: "warp",
        entry: "probe_warp",
        checks: "shfl.sync.idx.b32 with source lanes past 31 (lane = src & 31), two warps",
        targets: &["portable", "sm90a", "sm100a"],
        launch: k::warp::LAUNCH,
        output_bytes: k::warp::OUTPUT_BYTES as usize,
        body: k::warp::probe,
        input: no_input,
        expected: warp_expected,
        locate: warp_locate,
        tensor_map: false,
    },
    Probe {
        name: "bulk",
        entry: "probe_bulk",
        checks: "cp.async.bulk 1-D (1024 B + 48 B) on one mbarrier phase, arrive.expect_tx, test_wait / try_wait parity around each phase",
        targets: &["sm90a", "sm100a"],
        launch: k::bulk::LAUNCH,
        output_bytes: k::bulk::OUTPUT_BYTES as usize,
        body: k::bulk::probe,
        input: bulk_input,
        expected: bulk_expected,
        locate: bulk_locate,
        tensor_map: false,
    },
    Probe {
        name: "tma",
        entry: "probe_tma",
        checks: "cp.async.bulk.tensor.2d, 128B swizzle, boxes inside / past the end / at negative coordinates, zero and NaN fill",
        targets: &["sm90a", "sm100a"],
        launch: k::tma::LAUNCH,
        output_bytes: k::tma::OUTPUT_BYTES as usize,
        body: k::tma::probe,
        input: tma_input,
        expected: tma_expected,
        locate: tma_locate,
        tensor_map: true,
    },
    Probe {
        name: "wgmma",
        entry: "probe_wgmma",
        checks: "wgmma m64n64k16 f32.f16.f16 SS and RS, 128B-swizzled operands, 4 k-steps, scale-d 0 then 1, raw accumulators",
        targets: &["sm90a"],
        launch: k::wgmma::LAUNCH,
        output_bytes: k::wgmma::OUTPUT_BYTES as usize,
        body: k::wgmma::probe,
        input: wgmma_input,
        expected: wgmma_expected,
        locate: wgmma_locate,
        tensor_map: false,
    },
    Probe {
        name: "tcgen05_cp",
        entry: "probe_tcgen05_cp",
        checks: "tcgen05.alloc, tcgen05.cp.32x128b.warpx4 of 8 scale tiles, tcgen05.ld.32x32b.x32 of all 128 lanes (replication)",
        targets: &["sm100a"],
        launch: k::tcgen05_cp::LAUNCH,
        output_bytes: k::tcgen05_cp::OUTPUT_BYTES as usize,
        body: k::tcgen05_cp::probe,
        input: tcgen05_cp_input,
        expected: tcgen05_cp_expected,
        locate: tcgen05_cp_locate,
        tensor_map: false,
    },
    Probe {
        name: "tcgen05_mma",
        entry: "probe_tcgen05_mma",
        checks: "tcgen05.mma mxf4nvf4 block_scale 4X, M128 N64, 4 MMAs over K 256, 128B-swizzled e2m1, scales by tcgen05.cp, commit, ld",
        targets: &["sm100a"],
        launch: k::tcgen05_mma::LAUNCH,
        output_bytes: k::tcgen05_mma::OUTPUT_BYTES as usize,
        body: k::tcgen05_mma::probe,
        input: tcgen05_mma_input,
        expected: tcgen05_mma_expected,
        locate: tcgen05_mma_locate,
        tensor_map: false,
    },
];

/// The probe named `name`.
pub fn probe(name: &str) -> Option<&'static Probe> {
    PROBES.iter().find(|p| p.name == name)
}

/// The probe entry points the embedded PTX build `target` must contain, sorted.
pub fn entries_in(target: &str) -> Vec<&'static str> {
    let mut v: Vec<_> = PROBES.iter().filter(|p| p.targets.contains(&target)).map(|p| p.entry).collect();
    v.sort_unstable();
    v
}

/// The PTX build a GPU of compute capability `cc` runs probes from, if any.
pub fn target_for(cc: (u32, u32)) -> Option<&'static str> {
    match cc {
        (9, 0) => Some("sm90a"),
        (10, 0) => Some("sm100a"),
        // The portable build (sm_75 PTX, JIT-compiled upward) holds what every GPU has.
        cc if cc >= (7, 5) => Some("portable"),
        _ => None,
    }
}

fn arch_of(target: &str) -> &'static str {
    match target {
        "sm90a" => "sm_90a",
        "sm100a" => "sm_100a",
        "portable" => "sm_75+",
        _ => "?",
    }
}

// ---------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------

/// The emulator's tensor map `index` (0: zero fill, 1: NaN fill) for [`k::tma`]'s tensor
/// at `global_addr`.
pub fn tma_map(global_addr: u64, index: u32) -> emu::TensorMap {
    use emu::model::tensor_map::{OobFill, TmaSwizzle};
    emu::TensorMap {
        elem_bytes: k::tma::ELEM_BYTES,
        rank: 2,
        global_addr,
        dims: [k::tma::COLS as u64, k::tma::ROWS as u64, 0, 0, 0],
        strides: [0, k::tma::PITCH as u64, 0, 0, 0],
        box_dims: [k::tma::BOX[0], k::tma::BOX[1], 0, 0, 0],
        elem_strides: [1, 1, 0, 0, 0],
        swizzle: TmaSwizzle::B128,
        oob_fill: if index == 0 { OobFill::Zero } else { OobFill::NanRequestZeroFma },
    }
}

/// Why the emulator could not give a result.
#[derive(Clone, Debug)]
pub enum EmuFailure {
    /// The instruction model does not exist yet (`unimplemented!`): not a mismatch.
    ModelMissing(String),
    /// The emulator reported an error (a rule violation, a deadlock, a panic).
    Error(String),
}

/// Runs `p` under the emulator; returns its output.
pub fn run_emulated(p: &Probe) -> std::result::Result<Vec<u8>, EmuFailure> {
    let memory = emu::GlobalMemory::new();
    let input = (p.input)();
    let input_addr = memory.alloc_from("probe input", &input);
    let out = memory.alloc_from("probe output", &vec![POISON; p.output_bytes]);
    let aux = if p.tensor_map {
        let mut maps = Vec::new();
        for i in 0..2 {
            maps.extend(tma_map(input_addr, i).encode().map_err(EmuFailure::Error)?);
        }
        memory.alloc_from("tensor maps", &maps)
    } else {
        0
    };
    let args = ProbeArgs { out, input: input_addr, aux };
    let l = p.launch;
    let config = emu::LaunchConfig { grid: l.grid, block: l.block, dynamic_smem: l.dynamic_smem };
    if let Err(e) = emu::launch(&memory, config, || (p.body)(&args)) {
        // `unimplemented!("tcgen05.alloc")` panics with "not implemented: tcgen05.alloc".
        return Err(match e.message.split_once("not implemented: ") {
            Some((_, what)) if e.kind == emu::ErrorKind::Panic => {
                EmuFailure::ModelMissing(format!("no emulator model of {} yet", what.trim()))
            }
            _ => EmuFailure::Error(e.to_string()),
        });
    }
    let mut bytes = vec![0u8; p.output_bytes];
    memory.read(out, &mut bytes).map_err(EmuFailure::Error)?;
    Ok(bytes)
}

/// Probe modules loaded on one GPU, one per PTX build.
#[derive(Debug)]
pub struct GpuProbes<'g> {
    gpu: &'g Gpu,
    target: Option<&'static str>,
    modules: HashMap<&'static str, Arc<CudaModule>>,
}

impl<'g> GpuProbes<'g> {
    pub fn new(gpu: &'g Gpu) -> GpuProbes<'g> {
        GpuProbes { gpu, target: target_for(gpu.info.compute_capability), modules: HashMap::new() }
    }

    /// None when `p` can run on this GPU, else why not.
    pub fn skip_reason(&self, p: &Probe) -> Option<String> {
        let (major, minor) = self.gpu.info.compute_capability;
        match self.target {
            Some(t) if p.targets.contains(&t) => None,
            _ => Some(format!(
                "needs {}, this GPU is sm_{major}{minor}",
                p.targets.iter().map(|t| arch_of(t)).collect::<Vec<_>>().join(" or ")
            )),
        }
    }

    /// Runs `p` on the GPU (which must be able to: see [`GpuProbes::skip_reason`]).
    pub fn run(&mut self, p: &Probe) -> Result<Vec<u8>> {
        let target = self
            .target
            .filter(|t| p.targets.contains(t))
            .ok_or_else(|| Error::Failed(format!("probe {}: {}", p.name, self.skip_reason(p).unwrap_or_default())))?;
        let module = match self.modules.get(target) {
            Some(m) => m.clone(),
            None => {
                let m = embedded::load_module(&self.gpu.ctx, target)?;
                self.modules.insert(target, m.clone());
                m
            }
        };
        let function = module.load_function(p.entry).context(format!("finding probe {}", p.entry))?;
        let s = &self.gpu.stream;
        let input = (p.input)();
        let input_buf = s.clone_htod(&input).context("copying the probe input")?;
        let out_buf = s.clone_htod(&vec![POISON; p.output_bytes]).context("allocating the probe output")?;
        let input_ptr = input_buf.device_ptr(s).0;
        let out_ptr = out_buf.device_ptr(s).0;
        let map_buf = match p.tensor_map {
            true => Some(s.clone_htod(&encode_tensor_maps(self.gpu, input_ptr)?).context("copying the tensor map")?),
            false => None,
        };
        let aux = map_buf.as_ref().map_or(0, |b| b.device_ptr(s).0);
        let l = p.launch;
        let config = LaunchConfig {
            grid_dim: (l.grid[0], l.grid[1], l.grid[2]),
            block_dim: (l.block[0], l.block[1], l.block[2]),
            shared_mem_bytes: l.dynamic_smem,
        };
        let mut builder = s.launch_builder(&function);
        builder.arg(&out_ptr).arg(&input_ptr).arg(&aux);
        // SAFETY: the entry takes (out, input, aux) as u64 (`kernel::probes::ProbeArgs`);
        // the buffers have the sizes the probe declares.
        unsafe { builder.launch(config) }.context(format!("launching {}", p.entry))?;
        s.synchronize().context(format!("running {}", p.entry))?;
        let out = s.clone_dtoh(&out_buf).context("copying the probe output back")?;
        drop(map_buf);
        Ok(out)
    }
}

/// `cuTensorMapEncodeTiled` for [`k::tma`]'s tensor at device address `global`: the same
/// parameters as [`tma_map`] (map 0 as UINT16 with zero fill, map 1 as FLOAT16 with NaN
/// fill). Returns the two 128-byte `CUtensorMap`s back to back.
fn encode_tensor_maps(gpu: &Gpu, global: u64) -> Result<Vec<u8>> {
    let mut out = encode_tensor_map(gpu, global, 0)?;
    out.extend(encode_tensor_map(gpu, global, 1)?);
    Ok(out)
}

fn encode_tensor_map(gpu: &Gpu, global: u64, index: u32) -> Result<Vec<u8>> {
    use cudarc::driver::sys;
    use sys::CUtensorMapDataType::{CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_UINT16};
    use sys::CUtensorMapFloatOOBfill::{
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    };
    gpu.ctx.bind_to_thread().context("binding the context")?;
    let m = tma_map(global, index);
    let (data_type, fill) = match index {
        0 => (CU_TENSOR_MAP_DATA_TYPE_UINT16, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        _ => (CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
    };
    let dims: [u64; 2] = [m.dims[0], m.dims[1]];
    let strides: [u64; 1] = [m.strides[1]];
    let boxes: [u32; 2] = [m.box_dims[0], m.box_dims[1]];
    let elem_strides: [u32; 2] = [1, 1];
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every pointer addresses an array of the length the rank implies; `map` is
    // written by the driver.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            data_type,
            2,
            global as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            elem_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            fill,
        )
    }
    .result()
    .context("cuTensorMapEncodeTiled")?;
    // SAFETY: initialised by the driver (and zeroed before).
    let map = unsafe { map.assume_init() };
    Ok(map.opaque.iter().flat_map(|w| w.to_le_bytes()).collect())
}

// ---------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------

/// One side's outcome.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Ran: how many output bytes differ from the expected value.
    Ran { differing_bytes: usize },
    /// Not run, and why (not a failure).
    Skipped { why: String },
    /// Failed to run (a failure).
    Error { message: String },
}

/// One probe's row of the table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProbeResult {
    pub probe: &'static str,
    pub gpu: Side,
    pub emulator: Side,
    /// Bytes where the GPU and the emulator differ, when both ran.
    pub gpu_vs_emulator: Option<usize>,
    pub passed: bool,
    /// The first differences, one line each.
    pub details: Vec<String>,
}

fn differing(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len())
}

fn word(bytes: Option<&Vec<u8>>, at: usize) -> String {
    match bytes {
        Some(b) if at + 4 <= b.len() => {
            format!("{:#010x}", u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
        }
        _ => "-".into(),
    }
}

/// Runs `p` on the emulator and, if given, on the GPU, and compares.
pub fn check(p: &Probe, gpu: Option<&mut GpuProbes<'_>>) -> ProbeResult {
    let expected = (p.expected)(&(p.input)());
    assert_eq!(expected.len(), p.output_bytes, "probe {}: expected value of the wrong size", p.name);
    let (gpu_side, gpu_out) = match gpu {
        None => (Side::Skipped { why: "--emulate".into() }, None),
        Some(g) => match g.skip_reason(p) {
            Some(why) => (Side::Skipped { why }, None),
            None => match g.run(p) {
                Ok(out) => (Side::Ran { differing_bytes: differing(&out, &expected) }, Some(out)),
                Err(e) => (Side::Error { message: e.to_string() }, None),
            },
        },
    };
    let (emu_side, emu_out) = match run_emulated(p) {
        Ok(out) => (Side::Ran { differing_bytes: differing(&out, &expected) }, Some(out)),
        Err(EmuFailure::ModelMissing(m)) => (Side::Skipped { why: m }, None),
        Err(EmuFailure::Error(m)) => (Side::Error { message: m }, None),
    };
    let gpu_vs_emulator = match (&gpu_out, &emu_out) {
        (Some(g), Some(e)) => Some(differing(g, e)),
        _ => None,
    };
    let ok = |s: &Side| !matches!(s, Side::Error { .. } | Side::Ran { differing_bytes: 1.. });
    let passed = ok(&gpu_side) && ok(&emu_side) && gpu_vs_emulator.unwrap_or(0) == 0;
    let mut details = Vec::new();
    for side in [&gpu_side, &emu_side] {
        if let Side::Error { message } = side {
            details.push(message.lines().next().unwrap_or_default().to_string());
        }
    }
    // The first differing words, wherever one side differs from the expected value.
    let mut shown = 0;
    let mut at = 0;
    while at < expected.len() && shown < 6 {
        let end = (at + 4).min(expected.len());
        let differs = |o: &Option<Vec<u8>>| o.as_ref().is_some_and(|o| o[at..end] != expected[at..end]);
        if differs(&gpu_out) || differs(&emu_out) {
            details.push(format!(
                "byte {at:#06x} ({}): expected {}, gpu {}, emulator {}",
                (p.locate)(at),
                word(Some(&expected), at),
                word(gpu_out.as_ref(), at),
                word(emu_out.as_ref(), at)
            ));
            shown += 1;
        }
        at += 4;
    }
    ProbeResult { probe: p.name, gpu: gpu_side, emulator: emu_side, gpu_vs_emulator, passed, details }
}

fn side_text(s: &Side) -> String {
    match s {
        Side::Ran { differing_bytes: 0 } => "ok".into(),
        Side::Ran { differing_bytes } => format!("{differing_bytes} B differ"),
        Side::Skipped { why } => format!("skipped: {}", why.lines().next().unwrap_or_default()),
        Side::Error { message } => format!("ERROR: {}", message.lines().next().unwrap_or_default()),
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { s.chars().take(n - 1).collect::<String>() + "…" }
}

/// The table: one row per probe, then the details of each failure.
pub fn table(results: &[ProbeResult]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<12} {:<48} {:<48} {:>8} {:>8} {:>8}  verdict",
        "probe", "gpu vs expected", "emulator vs expected", "gpu≠exp", "emu≠exp", "gpu≠emu"
    );
    for r in results {
        let count = |s: &Side| match s {
            Side::Ran { differing_bytes } => differing_bytes.to_string(),
            _ => "-".into(),
        };
        let ran_anywhere = matches!(r.gpu, Side::Ran { .. }) || matches!(r.emulator, Side::Ran { .. });
        let verdict = match (r.passed, ran_anywhere) {
            (false, _) => "FAIL",
            (true, true) => "PASS",
            (true, false) => "skipped",
        };
        let _ = writeln!(
            t,
            "{:<12} {:<48} {:<48} {:>8} {:>8} {:>8}  {verdict}",
            r.probe,
            truncate(&side_text(&r.gpu), 48),
            truncate(&side_text(&r.emulator), 48),
            count(&r.gpu),
            count(&r.emulator),
            r.gpu_vs_emulator.map_or("-".into(), |n| n.to_string()),
        );
    }
    for r in results.iter().filter(|r| !r.details.is_empty()) {
        let _ = writeln!(t, "{}:", r.probe);
        for d in &r.details {
            let _ = writeln!(t, "  {d}");
        }
    }
    t
}

/// `host selftest --probes [--emulate]`: every probe, the table, exit code 1 on any
/// mismatch or error (skips are not failures).
pub fn selftest(gpu: Option<&Gpu>) -> (Vec<ProbeResult>, i32) {
    match gpu {
        Some(g) => {
            let (major, minor) = g.info.compute_capability;
            println!(
                "probes on {} (sm_{major}{minor}, PTX build {}) and under the CPU emulator, each against its expected value",
                g.info.name,
                target_for(g.info.compute_capability).unwrap_or("none")
            );
        }
        None => println!("probes under the CPU emulator against their expected values (no GPU: --emulate)"),
    }
    for p in &PROBES {
        println!(
            "  {:<12} {:<18} {}",
            p.name,
            p.targets.iter().map(|t| arch_of(t)).collect::<Vec<_>>().join(","),
            p.checks
        );
    }
    // Missing emulator models panic with `unimplemented!`; the emulator turns that into an
    // error the table reports, so the hook's message for it would only be noise. Every
    // other panic is still reported.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        if !message.is_some_and(|m| m.starts_with("not implemented")) {
            hook(info)
        }
    }));
    let mut gpu_probes = gpu.map(GpuProbes::new);
    let results: Vec<ProbeResult> = PROBES.iter().map(|p| check(p, gpu_probes.as_mut())).collect();
    // Back to the default hook (what the CLI started with).
    drop(std::panic::take_hook());
    print!("{}", table(&results));
    let failed = results.iter().filter(|r| !r.passed).count();
    let ran = |s: &Side| matches!(s, Side::Ran { .. });
    let skipped = results.iter().filter(|r| r.passed && !ran(&r.gpu) && !ran(&r.emulator)).count();
    println!(
        "probes: {} passed, {failed} failed, {skipped} skipped (nothing here could run them){}",
        results.len() - failed - skipped,
        if failed > 0 { " — see the differences above" } else { "" }
    );
    (results, if failed == 0 { 0 } else { 1 })
}

// ---------------------------------------------------------------------------------------
// Inputs and expected values (plain Rust, from the PTX ISA and the design notes)
// ---------------------------------------------------------------------------------------

/// A deterministic byte pattern with no zero bytes (so zero fill shows), varied by `salt`.
fn nonzero_bytes(len: usize, salt: u64) -> Vec<u8> {
    (0..len as u64).map(|i| (mix(i ^ (salt << 32)) % 255 + 1) as u8).collect()
}

/// SplitMix64's finaliser: a well-spread hash of `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

// --- cvt ---

/// The f32 inputs of the cvt probe: ties, subnormals, overflow, NaN, then spread values.
pub fn cvt_values() -> Vec<f32> {
    let p = |e: i32| 2f32.powi(e);
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        65504.0,                              // f16 max
        65519.0,                              // below the overflow midpoint: 65504
        65520.0,                              // the midpoint: ties to even = inf
        -65520.0,                             // -inf
        65536.0,                              // inf
        f32::INFINITY,                        //
        f32::NEG_INFINITY,                    //
        f32::from_bits(0x7FC0_0000),          // quiet NaN
        f32::from_bits(0x7F80_0001),          // signalling NaN
        f32::from_bits(0xFFC0_0001),          // negative NaN with payload
        p(-24),                               // smallest f16 subnormal
        p(-25),                               // half of it: tie to even = +0
        -p(-25),                              // -0
        f32::from_bits(p(-25).to_bits() + 1), // just above the tie: 2^-24
        3.0 * p(-25),                         // 1.5 ulp: tie to 2 ulp
        5.0 * p(-25),                         // 2.5 ulp: tie to 2 ulp
        p(-14),                               // smallest f16 normal
        p(-14) - p(-25),                      // 1023.5 ulp: tie to 1024 = 2^-14
        p(-14) - 3.0 * p(-25),                // 1022.5 ulp: tie to 1022
        1.0 + p(-11),                         // tie: 1
        1.0 + 3.0 * p(-11),                   // tie: 1 + 2^-9
        1.0 + p(-11) + p(-23),                // above the tie: 1 + 2^-10
        2049.0,                               // tie: 2048
        2051.0,                               // tie: 2052
        -2049.0,                              //
        0.1,
        1.0 / 3.0,
        1e-8,   // below 2^-25: +0
        -1e-8,  // -0
        3e-8,   // above 2^-25: 2^-24
        1e-40,  // f32 subnormal: +0
        -1e-40, // -0
        1e10,
        f32::MAX,
        f32::MIN,
        448.0,
        6.0,
        0.0078125,
        std::f32::consts::PI,
        std::f32::consts::E,
        65519.996, // just below the midpoint: 65504
        1e-5,      // f16 subnormal range
        -6.1e-5,   // just below the smallest normal
        -p(-24) * 1023.0,
    ];
    // Spread values across the f16 range (f32 exponents 100..145), both signs.
    let mut i = 0u64;
    while v.len() < k::cvt::F32_VALUES as usize {
        let h = mix(i + 1000);
        let exponent = 100 + (h % 45) as u32;
        let bits = ((h >> 8) as u32 & 0x8000_0000) | exponent << 23 | (h >> 20) as u32 & 0x7F_FFFF;
        v.push(f32::from_bits(bits));
        i += 1;
    }
    v
}

fn cvt_input() -> Vec<u8> {
    cvt_values().iter().flat_map(|x| x.to_bits().to_le_bytes()).collect()
}

/// f32 → f16 bits, round to nearest even (`half`'s conversion); NaN → the canonical NaN
/// 0x7FFF (PTX: `cvt` to a narrower float type gives the canonical NaN).
fn f16_bits(x: f32) -> u16 {
    if x.is_nan() { 0x7FFF } else { half::f16::from_f32(x).to_bits() }
}

/// e4m3 → f16 bits (exact; 0x7F and 0xFF are NaN → 0x7FFF).
fn e4m3_f16_bits(b: u8) -> u16 {
    f16_bits(nvfp4::e4m3::decode(b))
}

fn cvt_expected(input: &[u8]) -> Vec<u8> {
    let values: Vec<f32> = input.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let mut out = Vec::new();
    for t in 0..256u32 {
        let word = e4m3_f16_bits(t as u8) as u32 | (e4m3_f16_bits(255 - t as u8) as u32) << 16;
        out.extend(word.to_le_bytes());
    }
    for pair in values.chunks_exact(2) {
        let word = (f16_bits(pair[0]) as u32) << 16 | f16_bits(pair[1]) as u32;
        out.extend(word.to_le_bytes());
    }
    for &x in &values {
        out.extend(f16_bits(x).to_le_bytes());
    }
    out
}

fn cvt_locate(at: usize) -> String {
    let values = cvt_values();
    match at / 4 {
        w @ 0..256 => format!("cvt.rn.f16x2.e4m3x2 of bytes lo {w:#04x}, hi {:#04x}", 255 - w),
        w @ 256..288 => {
            let i = 2 * (w - 256);
            format!("cvt.rn.f16x2.f32 hi {:e} ({:#010x}), lo {:e}", values[i], values[i].to_bits(), values[i + 1])
        }
        _ => {
            let i = (at - 4 * 288) / 2;
            format!("cvt.rn.f16.f32 of values[{i}] and [{}]", i + 1)
        }
    }
}

// --- cp.async ---

fn cp_async_input() -> Vec<u8> {
    nonzero_bytes(k::cp_async::INPUT_BYTES as usize, 1)
}

fn cp_async_expected(input: &[u8]) -> Vec<u8> {
    let fill = k::cp_async::FILL.to_le_bytes()[0];
    // `size` bytes of which the first `n` come from `src` and the rest are zero.
    let partial = |src: usize, n: usize, size: usize| {
        input[src..src + n].iter().copied().chain(std::iter::repeat_n(0, size - n)).collect::<Vec<u8>>()
    };
    let mut out = Vec::new();
    for t in 0..k::cp_async::THREADS as usize {
        // Slot 0: cg 16 bytes, src_size t % 17: the rest zero.
        out.extend(partial(16 * t, t % 17, 16));
        // Slot 1: ca 4 bytes, src_size t % 5: zero up to 4, the other 12 untouched.
        out.extend(partial(512 + 4 * t, t % 5, 4));
        out.extend(std::iter::repeat_n(fill, 12));
        // Slot 2: a whole 16 bytes.
        out.extend(partial(1024 + 16 * t, 16, 16));
        // Slot 3: cg, src_size 5t % 17, completed through the mbarrier.
        out.extend(partial(1536 + 16 * t, 5 * t % 17, 16));
    }
    out
}

fn cp_async_locate(at: usize) -> String {
    let (t, slot) = (at / 64, (at % 64) / 16);
    match slot {
        0 => format!("thread {t}, cp.async.cg 16 with src_size {}", t % 17),
        1 => format!("thread {t}, cp.async.ca 4 with src_size {} (bytes 4.. must keep the fill)", t % 5),
        2 => format!("thread {t}, second group (wait_group 0)"),
        _ => {
            format!("thread {t}, cp.async.cg with src_size {} completed by cp.async.mbarrier.arrive.noinc", 5 * t % 17)
        }
    }
}

// --- warp ---

fn no_input() -> Vec<u8> {
    vec![0; 16]
}

fn warp_expected(_: &[u8]) -> Vec<u8> {
    use k::warp::{THREADS, src, value};
    (0..THREADS).flat_map(|t| value(t / 32 * 32 + (src(t % 32) & 31)).to_le_bytes()).collect()
}

fn warp_locate(at: usize) -> String {
    let t = (at / 4) as u32;
    format!("thread {t} reads lane {} (operand {})", k::warp::src(t % 32) & 31, k::warp::src(t % 32))
}

// --- bulk ---

fn bulk_input() -> Vec<u8> {
    nonzero_bytes(k::bulk::INPUT_BYTES as usize, 2)
}

/// `test_wait.parity p` is true iff the phase with parity p has completed: false for the
/// current phase, true for the one before (PTX ISA 9.7.13.15.16).
const BULK_OBSERVATIONS: [u32; 16] = [0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];

fn bulk_expected(input: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = BULK_OBSERVATIONS.iter().flat_map(|w| w.to_le_bytes()).collect();
    out.extend(&input[..1024]);
    out.extend(&input[1040..1088]);
    out
}

fn bulk_locate(at: usize) -> String {
    const WHAT: [&str; 8] = [
        "test_wait parity 0 after init (phase 0 current)",
        "test_wait parity 1 after init (the phase before 0 counts as complete)",
        "test_wait parity 0 after arrive.expect_tx, copies not issued (tx pending)",
        "test_wait parity 0 after phase 0 completed",
        "test_wait parity 1 after phase 0 completed (phase 1 current)",
        "test_wait parity 1 after phase 1 completed",
        "test_wait parity 0 after phase 1 completed (phase 2 current)",
        "try_wait parity 1 loop right after init returned (the phase before the current one)",
    ];
    match at {
        0..32 => WHAT[at / 4].into(),
        32..64 => "unused word".into(),
        _ if at < 64 + 1024 => format!("shared byte {} of the 1024-byte copy", at - 64),
        _ => format!("shared byte {} of the 48-byte copy", at - 64),
    }
}

// --- TMA ---

fn tma_input() -> Vec<u8> {
    nonzero_bytes(k::tma::INPUT_BYTES as usize, 3)
}

/// 128B swizzle of a byte offset in a 1024-byte aligned tile: 16-byte chunk c of 128-byte
/// row r lands at chunk `c ^ (r % 8)`.
fn swizzle128(offset: usize) -> usize {
    let (row, chunk, byte) = (offset / 128, (offset % 128) / 16, offset % 16);
    row * 128 + 16 * (chunk ^ (row % 8)) + byte
}

fn tma_expected(input: &[u8]) -> Vec<u8> {
    use k::tma::{BOX, BOX_BYTES, BOXES, COLS, ELEM_BYTES, PITCH, ROWS};
    let eb = ELEM_BYTES as usize;
    let mut out = vec![0u8; k::tma::OUTPUT_BYTES as usize];
    for (b, &(x0, y0, map)) in BOXES.iter().enumerate() {
        for r in 0..BOX[1] as i64 {
            for c in 0..BOX[0] as i64 {
                let (x, y) = (x0 as i64 + c, y0 as i64 + r);
                let dst = b * BOX_BYTES as usize + swizzle128((r as usize * BOX[0] as usize + c as usize) * eb);
                if (0..COLS as i64).contains(&x) && (0..ROWS as i64).contains(&y) {
                    let src = y as usize * PITCH as usize + x as usize * eb;
                    out[dst..dst + eb].copy_from_slice(&input[src..src + eb]);
                } else if map == 1 {
                    // NaN fill of an f16 tensor: the PTX ISA does not give the bits; an H100
                    // wrote 0x7FF7 (this probe, 2026-11-23), not the canonical 0x7FFF.
                    out[dst..dst + eb].copy_from_slice(&0x7FF7u16.to_le_bytes());
                }
            }
        }
    }
    out
}

fn tma_locate(at: usize) -> String {
    let bytes = k::tma::BOX_BYTES as usize;
    let (b, off) = (at / bytes, at % bytes);
    let (row, chunk) = (off / 128, (off % 128) / 16);
    let logical = chunk ^ (row % 8);
    let (x0, y0, map) = k::tma::BOXES[b];
    format!(
        "box {b} at ({x0}, {y0}) through map {map} ({} fill): row {row}, stored chunk {chunk} = elements x {}..{} of y {}",
        if map == 0 { "zero" } else { "NaN" },
        x0 + 8 * logical as i32,
        x0 + 8 * logical as i32 + 7,
        y0 + row as i32
    )
}

// --- wgmma ---

/// A[r][k] and B[n][k] of the wgmma probe: small multiples of 1/4 and 1/8, so every
/// product and partial sum is exact in f32 and the accumulation order cannot matter.
fn wgmma_a(r: usize, k: usize) -> f32 {
    ((r * 7 + k * 3) % 17) as f32 / 4.0 - 2.0
}

fn wgmma_b(n: usize, k: usize) -> f32 {
    ((n * 5 + k * 11) % 13) as f32 / 8.0 - 0.75
}

fn wgmma_input() -> Vec<u8> {
    let mut v = Vec::new();
    for r in 0..64 {
        for k in 0..64 {
            v.extend(half::f16::from_f32(wgmma_a(r, k)).to_bits().to_le_bytes());
        }
    }
    for n in 0..64 {
        for k in 0..64 {
            v.extend(half::f16::from_f32(wgmma_b(n, k)).to_bits().to_le_bytes());
        }
    }
    v
}

/// Which element of D accumulator register `v` of warpgroup thread `tid` holds
/// (sm90-wgmma.md 2.2: row 16w + g + 8((v>>1)&1), column 8(v>>2) + 2t + (v&1)).
fn wgmma_accumulator(tid: usize, v: usize) -> (usize, usize) {
    let (w, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    (16 * w + g + 8 * ((v >> 1) & 1), 8 * (v >> 2) + 2 * t + (v & 1))
}

fn wgmma_expected(input: &[u8]) -> Vec<u8> {
    let f16_at = |at: usize| half::f16::from_bits(u16::from_le_bytes([input[at], input[at + 1]])).to_f64();
    let d = |m: usize, n: usize| -> f32 {
        (0..64).map(|k| f16_at(2 * (64 * m + k)) * f16_at(8192 + 2 * (64 * n + k))).sum::<f64>() as f32
    };
    let mut one = Vec::new();
    for tid in 0..128 {
        for v in 0..32 {
            let (m, n) = wgmma_accumulator(tid, v);
            one.extend(d(m, n).to_bits().to_le_bytes());
        }
    }
    [one.clone(), one].concat()
}

fn wgmma_locate(at: usize) -> String {
    let form = if at < k::wgmma::RS_AT as usize { "SS" } else { "RS" };
    let i = (at % k::wgmma::RS_AT as usize) / 4;
    let (tid, v) = (i / 32, i % 32);
    let (m, n) = wgmma_accumulator(tid, v);
    format!("{form} thread {tid} d[{v}] = D[{m}][{n}]")
}

// --- tcgen05 ---

fn tcgen05_cp_input() -> Vec<u8> {
    nonzero_bytes(k::tcgen05_cp::INPUT_BYTES as usize, 4)
}

fn tcgen05_cp_expected(input: &[u8]) -> Vec<u8> {
    let columns = k::tcgen05_cp::COLUMNS as usize;
    let mut out = Vec::new();
    for lane in 0..128 {
        for column in 0..columns {
            // `.32x128b.warpx4`: row lane % 32 of tile column / 4, replicated in the four
            // 32-lane quarters; its word column % 4 in column 4·tile + column % 4.
            let at = 512 * (column / 4) + 16 * (lane % 32) + 4 * (column % 4);
            out.extend(u32_at(input, at).to_le_bytes());
        }
    }
    out
}

fn tcgen05_cp_locate(at: usize) -> String {
    let (lane, column) = (at / 4 / 32, at / 4 % 32);
    format!("lane {lane}, column {column}: tile {} row {} word {}", column / 4, lane % 32, column % 4)
}

/// The scales the tcgen05 MMA probe draws from: 0.5, 1, 1.5, 2, 3 (e4m3), so every
/// product and partial sum is exact in f32.
const MMA_SCALES: [u8; 5] = [0x30, 0x38, 0x3C, 0x40, 0x44];

fn tcgen05_mma_input() -> Vec<u8> {
    use k::tcgen05_mma::{INPUT_BYTES, SFA_AT};
    let mut v: Vec<u8> = (0..SFA_AT as u64).map(|i| mix(i ^ 0x5000_0000) as u8).collect();
    v.extend((SFA_AT..INPUT_BYTES).map(|i| MMA_SCALES[(mix(i as u64 ^ 0x6000_0000) % 5) as usize]));
    v
}

/// Byte offset of scale (row, j) (j = k/16 < 16) in four 512-byte blocked tiles: tile j/4,
/// row r at 16·(r % 32) + 4·(r / 32), scale j % 4 (the cuBLAS blocked layout).
fn blocked(row: usize, j: usize) -> usize {
    512 * (j / 4) + 16 * (row % 32) + 4 * (row / 32) + j % 4
}

fn tcgen05_mma_expected(input: &[u8]) -> Vec<u8> {
    use k::tcgen05_mma::{A_AT, B_AT, K, M, N, SFA_AT, SFB_AT};
    let row_bytes = (K / 2) as usize;
    let e2m1 = |base: usize, row: usize, k: usize| {
        let byte = input[base + row * row_bytes + k / 2];
        nvfp4::e2m1::decode(if k.is_multiple_of(2) { byte & 0xF } else { byte >> 4 }) as f64
    };
    let scale = |base: usize, row: usize, k: usize| nvfp4::e4m3::decode(input[base + blocked(row, k / 16)]) as f64;
    let mut out = Vec::new();
    for m in 0..M as usize {
        for n in 0..N as usize {
            let d: f64 = (0..K as usize)
                .map(|k| {
                    e2m1(A_AT as usize, m, k)
                        * scale(SFA_AT as usize, m, k)
                        * e2m1(B_AT as usize, n, k)
                        * scale(SFB_AT as usize, n, k)
                })
                .sum();
            out.extend((d as f32).to_bits().to_le_bytes());
        }
    }
    out
}

fn tcgen05_mma_locate(at: usize) -> String {
    let n = k::tcgen05_mma::N as usize;
    format!("D[{}][{}]", at / 4 / n, at / 4 % n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzle_matches_the_format_crate() {
        for off in (0..4096).step_by(16) {
            let want = nvfp4::swizzle::Swizzle::B128.apply(0x400 + off as u32) - 0x400;
            assert_eq!(swizzle128(off) as u32, want);
        }
    }

    #[test]
    fn blocked_matches_the_format_crate() {
        for row in 0..128 {
            for j in 0..16 {
                assert_eq!(blocked(row as usize, j as usize) as u64, nvfp4::layout::offset(row, j, 16));
            }
        }
    }

    #[test]
    fn every_expected_value_has_the_output_size() {
        for p in &PROBES {
            assert_eq!((p.expected)(&(p.input)()).len(), p.output_bytes, "{}", p.name);
        }
    }

    #[test]
    fn each_gpu_runs_the_probes_of_its_ptx_build() {
        assert_eq!(target_for((9, 0)), Some("sm90a"));
        assert_eq!(target_for((10, 0)), Some("sm100a"));
        assert_eq!(target_for((8, 9)), Some("portable"));
        assert_eq!(target_for((10, 3)), Some("portable"), "sm_100a PTX runs on 10.0 only");
        assert_eq!(target_for((7, 0)), None);
        for p in &PROBES {
            assert!(
                !p.targets.is_empty() && p.targets.iter().all(|t| crate::embedded::target(t).is_some()),
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn cvt_expectations_on_known_values() {
        assert_eq!(f16_bits(65520.0), 0x7C00);
        assert_eq!(f16_bits(2f32.powi(-25)), 0);
        assert_eq!(f16_bits(3.0 * 2f32.powi(-25)), 2);
        assert_eq!(f16_bits(2049.0), 0x6800);
        assert_eq!(e4m3_f16_bits(0x7F), 0x7FFF);
        assert_eq!(e4m3_f16_bits(0x80), 0x8000);
        assert_eq!(e4m3_f16_bits(0x01), 0x1800); // 2^-9
        assert_eq!(cvt_values().len(), k::cvt::F32_VALUES as usize);
    }
}
