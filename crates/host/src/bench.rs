//! `host bench`: our kernels and the baselines a Hopper user would pick, timed the same way
//! in one process, against limits measured in the same run.
//!
//! Every row is the median of N calls, each after flushing L2 (a memset of twice its size),
//! timed with CUDA events around everything that call launches. Our kernels are verified
//! against the exact CPU reference before they are timed; the baselines' outputs are
//! checked against the same reference, loosely (‖got − want‖ / ‖want‖ < 1e-2), because a
//! baseline with a wrong layout is the classic benchmark bug.
//!
//! The report itself (table, geomean, JSON, SVG) is plain data built by pure functions, so
//! it is tested without a GPU.

use std::fmt::Write as _;

use cudarc::driver::{CudaSlice, DevicePtr};
use half::f16;
use nvfp4::Shape;
use serde::Serialize;

use crate::baselines::{self, Cublas, Fp8Gemm, Fp8Output};
use crate::dequant::{self, Dequantizer};
use crate::device::{DeviceInfo, Gpu};
use crate::error::{CudaContext as _, Error, Result};
use crate::gemm::{Gemm, Timer, Timing};
use crate::generate::{Distribution, generate, generate_w4a16};
use crate::kernels::Kernel;
use crate::problem::AFormat;
use crate::reference::reference;
use crate::report::Verification;
use crate::verify::{POISON, compare, unwritten};

/// The GPU MODE benchmark shapes: the geomean row is taken over these.
pub const GPUMODE_SHAPES: [&str; 3] = ["128x7168x16384", "128x4096x7168", "128x7168x2048"];

/// The decode batch sizes timed by `host bench --decode`: M = 1 (one token) and M = 16 (a
/// small batch), each with the (N, K) of the three GPU MODE shapes. There the weights (B and
/// SFB) are nearly all the bytes, so the memory bandwidth is the floor and each row's `of
/// copy` (its bytes over its time, against the measured copy bandwidth) says how close it gets.
pub const DECODE_MS: [u32; 2] = [1, 16];

/// Rows up to this M are reported against the bandwidth floor (a note per shape).
pub const DECODE_MAX_M: u32 = 16;

/// `1xNxK` and `16xNxK` for each GPU MODE shape's N and K, in the GPU MODE order.
pub fn decode_shapes() -> Vec<Shape> {
    GPUMODE_SHAPES
        .iter()
        .flat_map(|text| {
            let s: Shape = text.parse().expect("the GPU MODE shapes parse");
            DECODE_MS.map(|m| Shape::new(m, s.n, s.k, s.l).expect("M = 1 and 16 are valid"))
        })
        .collect()
}

/// A shape's bandwidth floors: what a plain read of its A, B and scales took after the same
/// L2 flush as every row (100% of read) and, for a decode shape (M up to [`DECODE_MAX_M`]),
/// the time its bytes (A, B, scales read, C written) take at the measured copy bandwidth
/// (100% of copy) and B's share of them.
pub fn bandwidth_floor_note(shape: Shape, limits: &Limits, read: &ReadFloor) -> String {
    let read = format!(
        "a plain read of its {:.2} MB of A, B and scales took {:.2} us after the same L2 flush ({:.0} GB/s): \
         its floor under this method (100% of read)",
        read.bytes as f64 / 1e6,
        read.median_us,
        read.gbps
    );
    match limits.copy_gbps {
        Some(gbps) if shape.m <= DECODE_MAX_M => {
            let bytes = shape.bytes_read() + shape.c_bytes();
            let weights = shape.b_bytes() + shape.sfb_bytes();
            format!(
                "{shape}: decode; its {:.2} MB (B and SFB {:.1}% of them) take {:.2} us at the measured copy \
                 bandwidth (100% of copy); {read}",
                bytes as f64 / 1e6,
                100.0 * weights as f64 / bytes as f64,
                bytes as f64 / (gbps * 1e9) * 1e6
            )
        }
        _ => format!("{shape}: {read}"),
    }
}

/// A plain read of a shape's operand bytes (A, B and both scales, as the NVFP4 call reads
/// them) with `kernel::stream`, timed like every row: the bandwidth floor under the
/// benchmark's method, whose L2 flush leaves dirty lines that the first reads write back.
#[derive(Clone, Debug, Serialize)]
pub struct ReadFloor {
    pub shape: String,
    pub bytes: u64,
    pub median_us: f64,
    pub gbps: f64,
}

/// A baseline's output passes when ‖got − want‖₂ / ‖want‖₂ is below this.
pub const BASELINE_REL_TOL: f64 = 1e-2;

/// Side of the square fp16 GEMM that measures the tensor-core limit.
pub const LIMIT_GEMM_SIZE: u32 = 8192;

/// Largest device-to-device copy that measures the bandwidth limit.
pub const LIMIT_COPY_BYTES: usize = 1 << 30;

/// Names of the baseline rows.
pub const CUBLAS_F16: &str = "cuBLAS fp16, pre-dequantized";
pub const CUBLAS_BF16: &str = "cuBLAS bf16, pre-dequantized";
pub const CUBLASLT_FP8: &str = "cuBLASLt FP8 e4m3";
pub const DEQUANT_CUBLAS: &str = "dequant + cuBLAS fp16";

/// The limits measured at the start of the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Limits {
    /// Device-to-device copy: (bytes read + bytes written) / median time, GB/s.
    pub copy_gbps: Option<f64>,
    /// Bytes copied (each read once and written once).
    pub copy_bytes: u64,
    /// cuBLAS fp16 GEMM (fp32 accumulation, random data), TFLOP/s.
    pub fp16_gemm_tflops: Option<f64>,
    pub fp16_gemm_shape: String,
}

/// How a row's output was checked.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub passed: bool,
    /// What the table prints: `exact`, `1 ulp`, `rel 3.1e-6`, `FAIL ...`, `WRONG ...`.
    pub summary: String,
    /// ‖got − want‖₂ / ‖want‖₂ (baselines).
    pub rel_err: Option<f64>,
    /// The full comparison with the exact reference (our kernels).
    pub verification: Option<Verification>,
}

impl Check {
    /// Our kernels: the exact reference's verdict (rtol = atol = 1e-3, every element).
    pub fn exact(v: Verification) -> Check {
        let summary = if !v.passed {
            format!("FAIL {} wrong", v.mismatches + v.nan_mismatches + v.unwritten)
        } else if v.bit_exact {
            "exact".to_string()
        } else {
            format!("pass, {} ulp", v.max_ulps)
        };
        Check { passed: v.passed, summary, rel_err: None, verification: Some(v) }
    }

    /// Baselines: the relative error in the 2-norm, and elements that came out NaN or
    /// infinite (or unwritten) where the reference is finite.
    pub fn loose(rel_err: f64, non_finite: u64) -> Check {
        let passed = rel_err < BASELINE_REL_TOL && non_finite == 0;
        let summary = match (passed, non_finite) {
            (true, _) => format!("rel {rel_err:.1e}"),
            (false, 0) => format!("WRONG rel {rel_err:.1e}"),
            (false, n) => format!("WRONG {n} non-finite"),
        };
        Check { passed, summary, rel_err: Some(rel_err), verification: None }
    }
}

/// One timed (shape, implementation).
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub shape: String,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub l: u32,
    pub implementation: String,
    /// One of our kernels (as opposed to a baseline).
    pub ours: bool,
    pub median_us: f64,
    pub tflops: f64,
    /// Bytes the NVFP4 problem must move (A, B, SFA, SFB read, C written) / time.
    pub gbps: f64,
    /// `gbps` over the measured copy bandwidth.
    pub of_copy: Option<f64>,
    /// The plain read of the shape's bytes ([`ReadFloor`]): its time over this row's.
    pub of_read: Option<f64>,
    /// `tflops` over the measured fp16 GEMM rate.
    pub of_fp16_gemm: Option<f64>,
    pub check: Check,
    /// Baselines: this row's median over our best kernel's on the shape (above 1: ours
    /// is faster).
    pub speedup_of_best: Option<f64>,
    /// Our fastest correct kernel on this shape.
    pub best: bool,
    pub timing: Timing,
}

impl Entry {
    pub fn new(shape: Shape, implementation: &str, ours: bool, timing: Timing, check: Check, limits: &Limits) -> Entry {
        let seconds = timing.median_us * 1e-6;
        let tflops = shape.flops() / seconds / 1e12;
        let gbps = (shape.bytes_read() + shape.c_bytes()) as f64 / seconds / 1e9;
        Entry {
            shape: shape.to_string(),
            m: shape.m,
            n: shape.n,
            k: shape.k,
            l: shape.l,
            implementation: implementation.to_string(),
            ours,
            median_us: timing.median_us,
            tflops,
            gbps,
            of_copy: limits.copy_gbps.map(|c| gbps / c),
            of_read: None,
            of_fp16_gemm: limits.fp16_gemm_tflops.map(|t| tflops / t),
            check,
            speedup_of_best: None,
            best: false,
            timing,
        }
    }
}

/// A baseline (or limit) that did not run, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skip {
    pub shape: Option<String>,
    pub implementation: String,
    pub reason: String,
}

/// One implementation over the three GPU MODE shapes.
#[derive(Clone, Debug, Serialize)]
pub struct GeomeanRow {
    pub implementation: String,
    pub ours: bool,
    pub median_us: f64,
    pub tflops: f64,
    pub speedup_of_best: Option<f64>,
}

/// Name of the geomean row of our best kernel per shape.
pub const OUR_BEST: &str = "ours, best per shape";

/// Everything one `host bench` found.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub device: Option<DeviceInfo>,
    /// UTC, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    pub iters: usize,
    pub inputs: String,
    pub limits: Limits,
    /// Each shape's read floor.
    pub read_floors: Vec<ReadFloor>,
    /// Where cuBLAS and cuBLASLt were loaded from (or why not), and their versions.
    pub libraries: Vec<String>,
    pub entries: Vec<Entry>,
    pub geomean: Vec<GeomeanRow>,
    pub skipped: Vec<Skip>,
    /// Extra measurements (the dequantizer alone), one line each.
    pub notes: Vec<String>,
}

/// Marks our best correct kernel per shape and fills in every correct baseline's
/// speed-up (its median over the best's).
pub fn rank(entries: &mut [Entry]) {
    let shapes: Vec<String> = unique(entries.iter().map(|e| e.shape.clone()));
    for shape in shapes {
        let best = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.shape == shape && e.ours && e.check.passed)
            .min_by(|a, b| a.1.median_us.total_cmp(&b.1.median_us))
            .map(|(i, e)| (i, e.median_us));
        for (i, e) in entries.iter_mut().enumerate() {
            if e.shape != shape {
                continue;
            }
            e.best = best.is_some_and(|(b, _)| b == i);
            e.speedup_of_best = match best {
                Some((_, us)) if !e.ours && e.check.passed => Some(e.median_us / us),
                _ => None,
            };
        }
    }
}

fn unique(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in items {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Geometric mean (None for an empty list or a non-positive value).
pub fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|&v| v.is_nan() || v <= 0.0) {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// The correct rows of one shape.
fn passed_on<'a>(entries: &'a [Entry], shape: &'a str) -> impl Iterator<Item = &'a Entry> {
    entries.iter().filter(move |e| e.shape == shape && e.check.passed)
}

/// The geomean rows over the GPU MODE shapes: our best kernel per shape, then each
/// implementation that has a correct row on all three (none when a shape was not run).
pub fn geomean_rows(entries: &[Entry]) -> Vec<GeomeanRow> {
    let mut rows = Vec::new();
    let best: Vec<&Entry> = GPUMODE_SHAPES.iter().filter_map(|s| passed_on(entries, s).find(|e| e.best)).collect();
    if best.len() == GPUMODE_SHAPES.len() {
        let us: Vec<f64> = best.iter().map(|e| e.median_us).collect();
        let tf: Vec<f64> = best.iter().map(|e| e.tflops).collect();
        if let (Some(median_us), Some(tflops)) = (geomean(&us), geomean(&tf)) {
            rows.push(GeomeanRow {
                implementation: OUR_BEST.into(),
                ours: true,
                median_us,
                tflops,
                speedup_of_best: None,
            });
        }
    }
    for name in unique(entries.iter().map(|e| e.implementation.clone())) {
        let per_shape: Vec<&Entry> =
            GPUMODE_SHAPES.iter().filter_map(|s| passed_on(entries, s).find(|e| e.implementation == name)).collect();
        if per_shape.len() != GPUMODE_SHAPES.len() {
            continue;
        }
        let us: Vec<f64> = per_shape.iter().map(|e| e.median_us).collect();
        let tf: Vec<f64> = per_shape.iter().map(|e| e.tflops).collect();
        let speedups: Option<Vec<f64>> = per_shape.iter().map(|e| e.speedup_of_best).collect();
        if let (Some(median_us), Some(tflops)) = (geomean(&us), geomean(&tf)) {
            rows.push(GeomeanRow {
                implementation: name,
                ours: per_shape[0].ours,
                median_us,
                tflops,
                speedup_of_best: speedups.and_then(|s| geomean(&s)),
            });
        }
    }
    rows
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", 100.0 * v))
}

fn speedup_text(e: &Entry) -> String {
    match (e.best, e.speedup_of_best) {
        (true, _) => "best".into(),
        (_, Some(s)) => format!("{s:.2}x"),
        _ => String::new(),
    }
}

impl BenchReport {
    /// The human-readable report: header, limits, one table, the geomean rows, skips.
    pub fn text(&self) -> String {
        let mut s = String::new();
        match &self.device {
            Some(d) => {
                let _ = writeln!(
                    s,
                    "bench    {} (sm_{}{}, {} SMs, {:.0} MHz), driver for CUDA {}.{}, {}",
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    d.multiprocessors,
                    d.sm_clock_mhz,
                    d.driver_cuda_version.0,
                    d.driver_cuda_version.1,
                    self.date
                );
            }
            None => {
                let _ = writeln!(s, "bench    (no device), {}", self.date);
            }
        }
        let _ = writeln!(
            s,
            "method   median of {} calls per row, L2 flushed before each, CUDA events around everything the call launches; {}",
            self.iters, self.inputs
        );
        let copy = match self.limits.copy_gbps {
            Some(g) => format!(
                "device copy {:.0} GB/s ({:.2} GiB read + written)",
                g,
                self.limits.copy_bytes as f64 / (1u64 << 30) as f64
            ),
            None => "device copy not measured".into(),
        };
        let gemm = match self.limits.fp16_gemm_tflops {
            Some(t) => format!("cuBLAS fp16 GEMM {:.1} TFLOP/s ({}, random data)", t, self.limits.fp16_gemm_shape),
            None => "fp16 GEMM not measured (it needs cuBLAS)".into(),
        };
        let _ = writeln!(s, "limits   measured now: {copy}; {gemm}");
        for lib in &self.libraries {
            let _ = writeln!(s, "library  {lib}");
        }
        for skip in &self.skipped {
            let _ = writeln!(
                s,
                "skipped  {}{}: {}",
                skip.implementation,
                skip.shape.as_ref().map_or(String::new(), |sh| format!(" on {sh}")),
                skip.reason
            );
        }
        for note in &self.notes {
            let _ = writeln!(s, "note     {note}");
        }
        let _ = writeln!(s);
        let header = format!(
            "{:<16} {:<30} {:>10} {:>8} {:>7} {:>8} {:>8} {:>8} {:<15} {:>8}",
            "shape",
            "implementation",
            "median us",
            "TFLOP/s",
            "GB/s",
            "of copy",
            "of read",
            "of fp16",
            "check",
            "speed-up"
        );
        let _ = writeln!(s, "{header}");
        let _ = writeln!(s, "{}", "-".repeat(header.len()));
        let mut previous: Option<&str> = None;
        for e in &self.entries {
            if previous.is_some_and(|p| p != e.shape) {
                let _ = writeln!(s);
            }
            previous = Some(&e.shape);
            let name = if e.ours { format!("ours: {}", e.implementation) } else { e.implementation.clone() };
            let _ = writeln!(
                s,
                "{:<16} {:<30} {:>10.2} {:>8.1} {:>7.0} {:>8} {:>8} {:>8} {:<15} {:>8}",
                e.shape,
                name,
                e.median_us,
                e.tflops,
                e.gbps,
                percent(e.of_copy),
                percent(e.of_read),
                percent(e.of_fp16_gemm),
                e.check.summary,
                speedup_text(e)
            );
        }
        if !self.geomean.is_empty() {
            let _ = writeln!(s);
            for g in &self.geomean {
                let name = if g.ours && g.implementation != OUR_BEST {
                    format!("ours: {}", g.implementation)
                } else {
                    g.implementation.clone()
                };
                let _ = writeln!(
                    s,
                    "{:<16} {:<30} {:>10.2} {:>8.1} {:>7} {:>8} {:>8} {:>8} {:<15} {:>8}",
                    "geomean (3)",
                    name,
                    g.median_us,
                    g.tflops,
                    "",
                    "",
                    "",
                    "",
                    "",
                    g.speedup_of_best.map_or(String::new(), |v| format!("{v:.2}x"))
                );
            }
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "GB/s: the NVFP4 problem's bytes (A, B, scales read, C written) over the time, for every row; of copy / of fp16: \
             that over the measured limits; of read: the time a plain read of the shape's A, B and scales took after the \
             same L2 flush, over the row's (the notes give it in us)."
        );
        if self.entries.iter().any(|e| e.m <= DECODE_MAX_M) {
            let _ = writeln!(
                s,
                "decode rows (M <= {DECODE_MAX_M}): reading the weights is the floor, so `of copy` is how close the row \
                 gets to the measured copy bandwidth, and `of read` how close to what reading its bytes costs right after \
                 the flush, whose dirty lines the first reads write back (the notes give each shape's floors in us)."
            );
        }
        let _ = writeln!(
            s,
            "speed-up: the row's median over our best kernel's on the same shape (above 1: ours is faster); \
             geomean (3): over {}.",
            GPUMODE_SHAPES.join(", ")
        );
        s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
    }
}

/// `YYYY-MM-DD HH:MM UTC` for seconds since the Unix epoch (proleptic Gregorian).
pub fn utc_timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc_timestamp(secs)
}

// ---------------------------------------------------------------------------------------
// On the GPU.

/// What `host bench` was asked for.
#[derive(Clone, Debug)]
pub struct Options {
    pub shapes: Vec<Shape>,
    /// Our kernels to time (every one this GPU runs when empty).
    pub kernels: Vec<Kernel>,
    pub iters: usize,
    pub device: usize,
    pub baselines: bool,
    /// What A holds in our rows: NVFP4, and fp16 or bf16 (W4A16) on the kernels that take it.
    pub modes: Vec<AFormat>,
}

/// Our row's name: the kernel, with ` w4a16` when A is fp16 activations, ` w4a16 bf16`
/// when bf16.
pub fn row_name(kernel: Kernel, a_format: AFormat) -> String {
    match a_format {
        AFormat::Nvfp4 => kernel.name().to_string(),
        AFormat::F16 => format!("{} w4a16", kernel.name()),
        AFormat::Bf16 => format!("{} w4a16 bf16", kernel.name()),
    }
}

fn failed(e: String) -> Error {
    Error::Failed(e)
}

fn ptr<T>(gpu: &Gpu, b: &CudaSlice<T>) -> u64 {
    b.device_ptr(&gpu.stream).0
}

/// Pseudo-random fp16 values in [-1, 1) (SplitMix64), for the limit GEMM: never zeros.
fn random_f16(len: usize, seed: u64) -> Vec<u16> {
    use rayon::prelude::*;
    let mut out = vec![0u16; len];
    out.par_chunks_mut(1 << 16).enumerate().for_each(|(chunk, values)| {
        let mut state = seed ^ (chunk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for v in values {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let unit = (z >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
            *v = f16::from_f32(2.0 * unit - 1.0).to_bits();
        }
    });
    out
}

/// Records a baseline skipped for the whole run, and says so on stderr at once.
fn skip_now(skipped: &mut Vec<Skip>, implementation: String, reason: String) {
    eprintln!("bench: {implementation} skipped: {reason}");
    skipped.push(Skip { shape: None, implementation, reason });
}

/// Measures the device copy bandwidth and the fp16 GEMM rate.
fn measure_limits(
    gpu: &Gpu,
    timer: &mut Timer,
    cublas: Option<&Cublas>,
    iters: usize,
    skipped: &mut Vec<Skip>,
) -> Result<Limits> {
    let s = &gpu.stream;
    let mut limits = Limits::default();
    let iters = iters.clamp(1, 20);
    let (free, _) = gpu.memory()?;
    let copy_bytes = (LIMIT_COPY_BYTES as u64).min(free / 4) as usize & !((1 << 20) - 1);
    if copy_bytes >= 64 << 20 {
        let chunk: Vec<u16> = random_f16(8 << 20, 7); // 16 MiB
        let mut src = s.alloc_zeros::<u16>(copy_bytes / 2).context("allocating the copy source")?;
        let mut dst = s.alloc_zeros::<u16>(copy_bytes / 2).context("allocating the copy destination")?;
        for start in (0..copy_bytes / 2).step_by(chunk.len()) {
            let end = (start + chunk.len()).min(copy_bytes / 2);
            let mut view = src.slice_mut(start..end);
            s.memcpy_htod(&chunk[..end - start], &mut view).context("filling the copy source")?;
        }
        let t = timer.time(iters, || s.memcpy_dtod(&src, &mut dst).context("device-to-device copy"))?;
        limits.copy_bytes = copy_bytes as u64;
        limits.copy_gbps = Some(2.0 * copy_bytes as f64 / (t.median_us * 1e-6) / 1e9);
    } else {
        skipped.push(Skip {
            shape: None,
            implementation: "copy limit".into(),
            reason: format!("only {} MiB of GPU memory free", free >> 20),
        });
    }
    let n = LIMIT_GEMM_SIZE;
    limits.fp16_gemm_shape = format!("{n}x{n}x{n}");
    let Some(cublas) = cublas else {
        return Ok(limits);
    };
    let values = n as usize * n as usize;
    let (free, _) = gpu.memory()?;
    if (3 * values * 2) as u64 + (256 << 20) > free {
        skipped.push(Skip {
            shape: None,
            implementation: "fp16 GEMM limit".into(),
            reason: format!("{n}^3 needs {} MiB, {} MiB free", (3 * values * 2) >> 20, free >> 20),
        });
        return Ok(limits);
    }
    let a = s.clone_htod(&random_f16(values, 1)).context("copying the limit GEMM's A")?;
    let b = s.clone_htod(&random_f16(values, 2)).context("copying the limit GEMM's B")?;
    let c = s.alloc_zeros::<u16>(values).context("allocating the limit GEMM's C")?;
    let (pa, pb, pc) = (ptr(gpu, &a), ptr(gpu, &b), ptr(gpu, &c));
    // SAFETY: three n x n fp16 buffers.
    let run = || unsafe { cublas.gemm_f16((n, n, n, 1), pa, pb, pc) }.map_err(failed);
    match timer.time(iters, run) {
        Ok(t) => limits.fp16_gemm_tflops = Some(2.0 * (n as f64).powi(3) / (t.median_us * 1e-6) / 1e12),
        Err(e) => skipped.push(Skip { shape: None, implementation: "fp16 GEMM limit".into(), reason: e.to_string() }),
    }
    Ok(limits)
}

/// Runs the whole benchmark; returns the report and whether anything was wrong (one of
/// our kernels failed verification, a baseline disagreed with the reference, or the
/// dequantizer disagreed with the CPU).
pub fn run(opts: &Options) -> Result<(BenchReport, bool)> {
    let gpu = Gpu::open(opts.device)?;
    let kernels: Vec<Kernel> = if opts.kernels.is_empty() {
        // `naive` runs on every GPU CUDA 13 supports; where it does not, say why (exit 3).
        Kernel::Naive.check_device(&gpu.info)?;
        Kernel::ALL.into_iter().filter(|k| k.runs_on(gpu.info.compute_capability)).collect()
    } else {
        for k in &opts.kernels {
            k.check_device(&gpu.info)?;
        }
        opts.kernels.clone()
    };
    let gemms: Vec<Gemm> = kernels.iter().map(|&k| Gemm::new(&gpu, k)).collect::<Result<_>>()?;
    let dequantizer = Dequantizer::new(&gpu)?;
    let mut timer = Timer::new(&gpu)?;
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let mut read_floors: Vec<ReadFloor> = Vec::new();
    let mut library_lines = Vec::new();
    let mut bad = false;

    let (cublas, cublaslt_ok) = if opts.baselines {
        let libs = baselines::libraries();
        // One line per missing library, naming the baselines it takes with it.
        let cublas = match libs.cublas.as_ref().map(|from| (from, Cublas::new(&gpu))) {
            Ok((from, Ok(c))) => {
                let version =
                    c.version().map_or("?".into(), |v| format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100));
                library_lines.push(format!("cuBLAS {version} (from {from})"));
                Some(c)
            }
            Ok((from, Err(e))) => {
                skip_now(
                    &mut skipped,
                    format!("{CUBLAS_F16}; {CUBLAS_BF16}; {DEQUANT_CUBLAS}"),
                    format!("cuBLAS (from {from}): {e}"),
                );
                None
            }
            Err(e) => {
                skip_now(&mut skipped, format!("{CUBLAS_F16}; {CUBLAS_BF16}; {DEQUANT_CUBLAS}"), e.clone());
                None
            }
        };
        match &libs.cublaslt {
            Ok(from) => library_lines.push(format!("cuBLASLt from {from}")),
            Err(e) => skip_now(&mut skipped, CUBLASLT_FP8.into(), e.clone()),
        }
        (cublas, libs.cublaslt.is_ok())
    } else {
        notes.push("baselines not run (--no-baselines)".into());
        (None, false)
    };

    eprintln!("bench: measuring the limits (device copy, fp16 GEMM)");
    let limits = measure_limits(&gpu, &mut timer, cublas.as_ref(), opts.iters, &mut skipped)?;
    let mut entries = Vec::new();
    for &shape in &opts.shapes {
        eprintln!("bench: {shape}: inputs and the exact CPU reference");
        crate::generate::check_host_memory(shape, false)?;
        let problem = generate(shape, Distribution::GpuMode, 1);
        let want = reference(&problem);
        let read = read_floor(&gpu, &mut timer, &problem, opts.iters)?;
        eprintln!("bench: {shape}: {:<30} {:>10.2} us", "plain read of its bytes", read.median_us);
        notes.push(bandwidth_floor_note(shape, &limits, &read));
        read_floors.push(read);
        for &mode in &opts.modes {
            let takers: Vec<usize> = (0..kernels.len()).filter(|&i| kernels[i].takes(mode)).collect();
            if takers.is_empty() {
                continue;
            }
            // W4A16: the same weights, A as fp16 or bf16 activations (exact in fp32 sums too).
            let w4a16 = mode.is_16bit().then(|| generate_w4a16(shape, Distribution::GpuMode, 1, mode));
            let w4a16_want = w4a16.as_ref().map(reference);
            let (problem, want) = match (&w4a16, &w4a16_want) {
                (Some(p), Some(w)) => (p, w),
                _ => (&problem, &want),
            };
            let mut d = gemms[takers[0]].upload(problem)?;
            for &i in &takers {
                let (gemm, name) = (&gemms[i], row_name(kernels[i], mode));
                let got = gemm.run(&mut d)?;
                let v = Verification::new("cpu", &compare(shape, &got, want), unwritten(&got), got.dtype);
                bad |= !v.passed;
                // On the bench's one flush buffer, as every baseline (what else a process
                // had allocated moved this kernel's time by 1-1.5 us on an H100,
                // docs/perf-notes.md, session 38: one method for every contender).
                let timing = timer.time(opts.iters, || gemm.launch(&mut d))?;
                let e = Entry::new(shape, &name, true, timing, Check::exact(v), &limits);
                eprintln!("bench: {shape}: {:<30} {:>10.2} us  {}", name, e.median_us, e.check.summary);
                entries.push(e);
            }
        }
        if opts.baselines {
            // The baselines are compared in fp16 values (the bench runs the identity epilogue).
            let want_f16: Vec<f16> = want.bits.iter().map(|&b| f16::from_bits(b)).collect();
            let ctx =
                ShapeRun { gpu: &gpu, shape, problem: &problem, want: &want_f16, iters: opts.iters, limits: &limits };
            bad |= ctx.baselines(
                &mut timer,
                &dequantizer,
                cublas.as_ref(),
                cublaslt_ok,
                &mut entries,
                &mut skipped,
                &mut notes,
            )?;
        }
    }
    apply_read_floors(&mut entries, &read_floors);
    rank(&mut entries);
    let geomean = geomean_rows(&entries);
    let report = BenchReport {
        device: Some(gpu.info.clone()),
        date: now(),
        iters: opts.iters,
        inputs: "gpumode inputs (seed 1)".into(),
        limits,
        read_floors,
        libraries: library_lines,
        entries,
        geomean,
        skipped,
        notes,
    };
    Ok((report, bad))
}

/// Sets each entry's `of_read`: its shape's read floor (if measured) over its time.
pub fn apply_read_floors(entries: &mut [Entry], floors: &[ReadFloor]) {
    for e in entries {
        e.of_read = floors.iter().find(|r| r.shape == e.shape).map(|r| r.median_us / e.median_us);
    }
}

/// Times a plain read of `p`'s operand bytes (B, SFB, A, SFA, as one buffer) after the
/// same flush as every row, once its XORs are checked against the CPU's.
fn read_floor(gpu: &Gpu, timer: &mut Timer, p: &crate::problem::Problem, iters: usize) -> Result<ReadFloor> {
    let bytes: Vec<u8> = [&p.b[..], &p.sfb, &p.a, &p.sfa].concat();
    let len = bytes.len();
    let padded = crate::stream::padded(bytes);
    let reader = crate::stream::Reader::new(gpu, &padded)?;
    reader.launch()?;
    if reader.xors()? != crate::stream::expected(&padded, gpu.info.multiprocessors) {
        return Err(failed(format!("{}: the plain read's XORs differ from the CPU's", p.shape)));
    }
    let timing = timer.time(iters, || reader.launch())?;
    Ok(ReadFloor {
        shape: p.shape.to_string(),
        bytes: len as u64,
        median_us: timing.median_us,
        gbps: len as f64 / (timing.median_us * 1e-6) / 1e9,
    })
}

/// One shape's baselines.
struct ShapeRun<'a> {
    gpu: &'a Gpu,
    shape: Shape,
    problem: &'a crate::problem::Problem,
    want: &'a [f16],
    iters: usize,
    limits: &'a Limits,
}

impl ShapeRun<'_> {
    /// Checks a baseline's C (downloaded as f32) against the reference.
    fn check(&self, got: &[f32]) -> Check {
        let (rel, non_finite) = baselines::relative_error(got, self.want);
        Check::loose(rel, non_finite)
    }

    fn skip(&self, skipped: &mut Vec<Skip>, implementation: &str, reason: String) {
        eprintln!("bench: {}: {implementation} skipped: {reason}", self.shape);
        skipped.push(Skip { shape: Some(self.shape.to_string()), implementation: implementation.into(), reason });
    }

    fn push(&self, entries: &mut Vec<Entry>, name: &str, timing: Timing, check: Check) -> bool {
        let wrong = !check.passed;
        if wrong {
            eprintln!(
                "bench: {}: {name} disagrees with the reference ({}): its layout or types are wrong; not compared",
                self.shape, check.summary
            );
        }
        let e = Entry::new(self.shape, name, false, timing, check, self.limits);
        eprintln!("bench: {}: {:<30} {:>10.2} us  {}", self.shape, name, e.median_us, e.check.summary);
        entries.push(e);
        wrong
    }

    /// Runs every baseline on this shape; returns whether something was wrong.
    #[allow(clippy::too_many_arguments)]
    fn baselines(
        &self,
        timer: &mut Timer,
        dequantizer: &Dequantizer,
        cublas: Option<&Cublas>,
        cublaslt_ok: bool,
        entries: &mut Vec<Entry>,
        skipped: &mut Vec<Skip>,
        notes: &mut Vec<String>,
    ) -> Result<bool> {
        let (gpu, shape, p) = (self.gpu, self.shape, self.problem);
        let s = &gpu.stream;
        let (m, n, k, l) = (shape.m, shape.n, shape.k, shape.l);
        let (a_len, b_len, c_len) = (
            l as usize * m as usize * k as usize,
            l as usize * n as usize * k as usize,
            l as usize * m as usize * n as usize,
        );
        let needed = (a_len + b_len) * 3 + c_len * 2 + shape.bytes_read() as usize + baselines::LT_WORKSPACE_BYTES;
        let (free, _) = gpu.memory()?;
        if needed as u64 + (512 << 20) > free {
            for name in [CUBLAS_F16, CUBLAS_BF16, CUBLASLT_FP8, DEQUANT_CUBLAS] {
                self.skip(skipped, name, format!("needs {} MiB of GPU memory, {} MiB free", needed >> 20, free >> 20));
            }
            return Ok(false);
        }
        let mut bad = false;
        eprintln!("bench: {shape}: dequantizing on the CPU (for the checks and the FP8 operands)");
        let cpu_a = dequant::dequantize(&p.a, &p.sfa, m, k, l);
        let cpu_b = dequant::dequantize(&p.b, &p.sfb, n, k, l);

        let a = s.clone_htod(&p.a).context("copying A")?;
        let b = s.clone_htod(&p.b).context("copying B")?;
        let sfa = s.clone_htod(&p.sfa).context("copying SFA")?;
        let sfb = s.clone_htod(&p.sfb).context("copying SFB")?;
        let mut a16 = s.alloc_zeros::<u16>(a_len).context("allocating fp16 A")?;
        let mut b16 = s.alloc_zeros::<u16>(b_len).context("allocating fp16 B")?;
        let mut c = s.alloc_zeros::<u16>(c_len).context("allocating C")?;
        let (pa, pb, psfa, psfb) = (ptr(gpu, &a), ptr(gpu, &b), ptr(gpu, &sfa), ptr(gpu, &sfb));
        let (pa16, pb16, pc) = (ptr(gpu, &a16), ptr(gpu, &b16), ptr(gpu, &c));
        // SAFETY: the buffers above have exactly the sizes the shape implies.
        let dequant_both = || unsafe {
            dequantizer.launch(pa, psfa, pa16, m, k, l)?;
            dequantizer.launch(pb, psfb, pb16, n, k, l)
        };

        // The dequantizer must equal the CPU bit for bit (every value is exact in fp16).
        dequant_both()?;
        s.synchronize().context("running the dequantizer")?;
        let bits = |v: Vec<u16>| v.into_iter().map(f16::from_bits).collect::<Vec<f16>>();
        let gpu_a = bits(s.clone_dtoh(&a16).context("copying fp16 A back")?);
        let gpu_b = bits(s.clone_dtoh(&b16).context("copying fp16 B back")?);
        let (diff_a, _) = dequant::bit_differences(&gpu_a, &cpu_a);
        let (diff_b, _) = dequant::bit_differences(&gpu_b, &cpu_b);
        drop((gpu_a, gpu_b));
        let dequant_ok = diff_a == 0 && diff_b == 0;
        if !dequant_ok {
            bad = true;
            self.skip(
                skipped,
                DEQUANT_CUBLAS,
                format!("the dequant kernel differs from the CPU in {diff_a} values of A and {diff_b} of B"),
            );
            // The fp16 baseline still gets correct operands.
            let to_bits = |v: &[f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
            s.memcpy_htod(&to_bits(&cpu_a), &mut a16).context("copying fp16 A")?;
            s.memcpy_htod(&to_bits(&cpu_b), &mut b16).context("copying fp16 B")?;
        } else {
            let t = timer.time(self.iters, dequant_both)?;
            let bytes = shape.bytes_read() + 2 * (a_len + b_len) as u64;
            notes.push(format!(
                "{shape}: the dequant kernel alone (A and B to fp16, bit-exact) takes {:.2} us = {:.0} GB/s read + written{}",
                t.median_us,
                bytes as f64 / (t.median_us * 1e-6) / 1e9,
                self.limits.copy_gbps.map_or(String::new(), |c| format!(
                    " ({:.0}% of the copy limit)",
                    100.0 * bytes as f64 / (t.median_us * 1e-6) / 1e9 / c
                ))
            ));
        }

        let poison = vec![POISON.to_bits(); c_len];
        let download_f16 = |c: &CudaSlice<u16>| -> Result<Vec<f32>> {
            Ok(s.clone_dtoh(c).context("copying C back")?.into_iter().map(|b| f16::from_bits(b).to_f32()).collect())
        };

        // (A missing cuBLAS was said once, at the start.)
        if let Some(cublas) = cublas {
            // SAFETY: fp16 A [L, M, K], B [L, N, K], C [L, M, N].
            let gemm = || unsafe { cublas.gemm_f16((m, n, k, l), pa16, pb16, pc) }.map_err(failed);
            s.memcpy_htod(&poison, &mut c).context("poisoning C")?;
            match gemm().and_then(|()| s.synchronize().context("running cuBLAS")) {
                Ok(()) => {
                    let check = self.check(&download_f16(&c)?);
                    let t = timer.time(self.iters, gemm)?;
                    bad |= self.push(entries, CUBLAS_F16, t, check);
                }
                Err(e) => self.skip(skipped, CUBLAS_F16, e.to_string()),
            }
            if dequant_ok {
                let end_to_end = || {
                    dequant_both()?;
                    gemm()
                };
                s.memcpy_htod(&poison, &mut c).context("poisoning C")?;
                match end_to_end().and_then(|()| s.synchronize().context("running dequant + cuBLAS")) {
                    Ok(()) => {
                        let check = self.check(&download_f16(&c)?);
                        let t = timer.time(self.iters, end_to_end)?;
                        bad |= self.push(entries, DEQUANT_CUBLAS, t, check);
                    }
                    Err(e) => self.skip(skipped, DEQUANT_CUBLAS, e.to_string()),
                }
            }
        }
        drop((a16, b16));

        // bf16, what a bf16 model's W4A16 is measured against: the same operands (every
        // dequantized value is e2m1 · e4m3, exact in bf16 too), bf16 out.
        if let Some(cublas) = cublas {
            let to_bf16 =
                |v: &[f16]| v.iter().map(|x| half::bf16::from_f32(x.to_f32()).to_bits()).collect::<Vec<u16>>();
            let a_bf16 = s.clone_htod(&to_bf16(&cpu_a)).context("copying bf16 A")?;
            let b_bf16 = s.clone_htod(&to_bf16(&cpu_b)).context("copying bf16 B")?;
            let (pa_bf16, pb_bf16) = (ptr(gpu, &a_bf16), ptr(gpu, &b_bf16));
            // SAFETY: bf16 A [L, M, K], B [L, N, K], C [L, M, N].
            let gemm = || unsafe { cublas.gemm_16bit((m, n, k, l), true, pa_bf16, pb_bf16, pc) }.map_err(failed);
            s.memcpy_htod(&poison, &mut c).context("poisoning C")?;
            match gemm().and_then(|()| s.synchronize().context("running cuBLAS bf16")) {
                Ok(()) => {
                    let raw = s.clone_dtoh(&c).context("copying C back")?;
                    let got: Vec<f32> = raw.into_iter().map(|b| half::bf16::from_bits(b).to_f32()).collect();
                    let check = self.check(&got);
                    let t = timer.time(self.iters, gemm)?;
                    bad |= self.push(entries, CUBLAS_BF16, t, check);
                }
                Err(e) => self.skip(skipped, CUBLAS_BF16, e.to_string()),
            }
        }

        if cublaslt_ok {
            let fa = baselines::to_fp8(&cpu_a);
            let fb = baselines::to_fp8(&cpu_b);
            drop((cpu_a, cpu_b));
            let a8 = s.clone_htod(&fa.bytes).context("copying FP8 A")?;
            let b8 = s.clone_htod(&fb.bytes).context("copying FP8 B")?;
            let (pa8, pb8) = (ptr(gpu, &a8), ptr(gpu, &b8));
            match Fp8Gemm::new(gpu, (m, n, k, l), fa.scale, fb.scale) {
                Ok(plan) => {
                    // SAFETY: e4m3 A [L, M, K], B [L, N, K]; C holds L·M·N 16-bit values.
                    let gemm = || unsafe { plan.run(pa8, pb8, pc) }.map_err(failed);
                    s.memcpy_htod(&poison, &mut c).context("poisoning C")?;
                    match gemm().and_then(|()| s.synchronize().context("running cuBLASLt FP8")) {
                        Ok(()) => {
                            let raw = s.clone_dtoh(&c).context("copying C back")?;
                            let got: Vec<f32> = match plan.output {
                                Fp8Output::F16 => raw.into_iter().map(|b| f16::from_bits(b).to_f32()).collect(),
                                Fp8Output::Bf16 => raw.into_iter().map(|b| half::bf16::from_bits(b).to_f32()).collect(),
                            };
                            let check = self.check(&got);
                            let t = timer.time(self.iters, gemm)?;
                            let name = match plan.output {
                                Fp8Output::F16 => CUBLASLT_FP8.to_string(),
                                Fp8Output::Bf16 => format!("{CUBLASLT_FP8} (bf16 out)"),
                            };
                            bad |= self.push(entries, &name, t, check);
                        }
                        Err(e) => self.skip(skipped, CUBLASLT_FP8, e.to_string()),
                    }
                }
                Err(e) => self.skip(skipped, CUBLASLT_FP8, e),
            }
        }
        Ok(bad)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn timing(us: f64) -> Timing {
        Timing::from_samples(vec![us * 0.99, us, us * 1.02])
    }

    fn limits() -> Limits {
        Limits {
            copy_gbps: Some(3000.0),
            copy_bytes: 1 << 30,
            fp16_gemm_tflops: Some(700.0),
            fp16_gemm_shape: "8192x8192x8192".into(),
        }
    }

    fn exact() -> Check {
        Check { passed: true, summary: "exact".into(), rel_err: None, verification: None }
    }

    /// A plausible H100 run: two of our kernels and three baselines on the four shapes.
    pub(crate) fn sample_report() -> BenchReport {
        let l = limits();
        let mut entries = Vec::new();
        let times = [
            ("128x7168x16384", [17549.0, 291.84, 102.8, 56.0, 215.0]),
            ("128x4096x7168", [4465.0, 131.17, 33.8, 19.9, 62.0]),
            ("128x7168x2048", [2178.0, 42.48, 19.1, 13.5, 45.0]),
            ("2304x4608x7168", [85873.0, 629.04, 210.2, 112.9, 260.0]),
        ];
        for (shape, t) in times {
            let shape: Shape = shape.parse().unwrap();
            entries.push(Entry::new(shape, "naive", true, timing(t[0]), exact(), &l));
            entries.push(Entry::new(shape, "sm90", true, timing(t[1]), exact(), &l));
            entries.push(Entry::new(shape, CUBLAS_F16, false, timing(t[2]), Check::loose(2e-6, 0), &l));
            entries.push(Entry::new(shape, CUBLASLT_FP8, false, timing(t[3]), Check::loose(3e-6, 0), &l));
            entries.push(Entry::new(shape, DEQUANT_CUBLAS, false, timing(t[4]), Check::loose(2e-6, 0), &l));
        }
        rank(&mut entries);
        let geomean = geomean_rows(&entries);
        BenchReport {
            device: Some(DeviceInfo {
                ordinal: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: (9, 0),
                multiprocessors: 132,
                sm_clock_mhz: 1980.0,
                memory_clock_mhz: 2619.0,
                memory_bus_bits: 5120,
                l2_bytes: 50 << 20,
                memory_bytes: 80 << 30,
                max_shared_per_block: 227 << 10,
                driver_cuda_version: (13, 0),
            }),
            date: utc_timestamp(1_795_460_400),
            iters: 50,
            inputs: "gpumode inputs (seed 1)".into(),
            limits: l,
            read_floors: vec![],
            libraries: vec!["cuBLAS 13.1.0 (from the loader path)".into()],
            entries,
            geomean,
            skipped: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn w4a16_rows_are_named_apart_from_the_nvfp4_rows() {
        assert_eq!(row_name(Kernel::Sm90v2, AFormat::Nvfp4), "sm90v2");
        assert_eq!(row_name(Kernel::Sm90v2, AFormat::F16), "sm90v2 w4a16");
        assert_eq!(row_name(Kernel::Sm90v2, AFormat::Bf16), "sm90v2 w4a16 bf16");
    }

    #[test]
    fn decode_shapes_keep_the_gpumode_n_and_k() {
        let names: Vec<String> = decode_shapes().iter().map(|s| s.to_string()).collect();
        assert_eq!(
            names,
            ["1x7168x16384", "16x7168x16384", "1x4096x7168", "16x4096x7168", "1x7168x2048", "16x7168x2048"]
        );
    }

    #[test]
    fn decode_rows_are_measured_against_the_bandwidth_floor() {
        let l = limits();
        let shape: Shape = "1x7168x16384".parse().unwrap();
        let read = ReadFloor { shape: shape.to_string(), bytes: 66_060_288, median_us: 34.0, gbps: 1943.0 };
        let note = bandwidth_floor_note(shape, &l, &read);
        let bytes = (shape.bytes_read() + shape.c_bytes()) as f64;
        let floor_us = bytes / 3000e9 * 1e6;
        assert!(note.contains(&format!("{floor_us:.2} us")), "{note}");
        assert!(note.starts_with("1x7168x16384: decode;") && note.contains("B and SFB 99."), "{note}");
        // A row at the floor is at 100% of copy.
        let e = Entry::new(shape, "sm90v2", true, timing(floor_us), exact(), &l);
        assert!((e.of_copy.unwrap() - 1.0).abs() < 1e-9);
        // The plain read's floor: in the note of every shape, and each row of its shape
        // against it; the copy floor only for decode shapes.
        assert!(
            note.contains(
                "; a plain read of its 66.06 MB of A, B and scales took 34.00 us after the same L2 flush (1943 GB/s)"
            ),
            "{note}"
        );
        let prefill = bandwidth_floor_note("128x7168x16384".parse().unwrap(), &l, &read);
        assert!(prefill.starts_with("128x7168x16384: a plain read of") && !prefill.contains("copy"), "{prefill}");
        let unmeasured = bandwidth_floor_note(shape, &Limits::default(), &read);
        assert!(unmeasured.starts_with("1x7168x16384: a plain read of"), "{unmeasured}");
        let other = Entry::new("16x7168x16384".parse().unwrap(), "sm90v2", true, timing(40.0), exact(), &l);
        let mut decode = vec![Entry::new(shape, "sm90v2", true, timing(40.0), exact(), &l), other];
        apply_read_floors(&mut decode, std::slice::from_ref(&read));
        assert!((decode[0].of_read.unwrap() - 0.85).abs() < 1e-9);
        assert_eq!(decode[1].of_read, None);
        // The footer explains the columns only when a decode row is there.
        let mut r = sample_report();
        assert!(!r.text().contains("decode rows"));
        r.entries.push(e);
        r.entries.append(&mut decode);
        let text = r.text();
        assert!(text.contains("decode rows (M <= 16)") && text.contains("`of read`"), "{text}");
        let row = text.lines().find(|l| l.starts_with("1x7168x16384") && l.contains("40.00")).unwrap();
        assert!(row.contains("85.0%"), "{row}");
    }

    #[test]
    fn entries_compute_rates_and_fractions_of_the_measured_limits() {
        let shape: Shape = "128x7168x16384".parse().unwrap();
        let e = Entry::new(shape, "sm90", true, timing(100.0), exact(), &limits());
        assert!((e.tflops - shape.flops() / 100e-6 / 1e12).abs() < 1e-9);
        let bytes = (shape.bytes_read() + shape.c_bytes()) as f64;
        assert!((e.gbps - bytes / 100e-6 / 1e9).abs() < 1e-9);
        assert!((e.of_copy.unwrap() - e.gbps / 3000.0).abs() < 1e-12);
        assert!((e.of_fp16_gemm.unwrap() - e.tflops / 700.0).abs() < 1e-12);
        let none = Entry::new(shape, "sm90", true, timing(100.0), exact(), &Limits::default());
        assert!(none.of_copy.is_none() && none.of_fp16_gemm.is_none());
    }

    #[test]
    fn rank_marks_the_best_correct_kernel_and_the_speedups() {
        let r = sample_report();
        let on = |shape: &str| r.entries.iter().filter(|e| e.shape == shape).collect::<Vec<_>>();
        for shape in ["128x7168x16384", "2304x4608x7168"] {
            let rows = on(shape);
            let best: Vec<_> = rows.iter().filter(|e| e.best).collect();
            assert_eq!(best.len(), 1);
            assert_eq!(best[0].implementation, "sm90");
            for e in rows.iter().filter(|e| !e.ours) {
                let want = e.median_us / best[0].median_us;
                assert!((e.speedup_of_best.unwrap() - want).abs() < 1e-12);
            }
            assert!(rows.iter().filter(|e| e.ours).all(|e| e.speedup_of_best.is_none()));
        }
        // A failing kernel is never the best, and a wrong baseline gets no speed-up.
        let l = limits();
        let shape: Shape = "128x256x256".parse().unwrap();
        let fail = Check { passed: false, summary: "FAIL 3 wrong".into(), rel_err: None, verification: None };
        let mut entries = vec![
            Entry::new(shape, "fast-but-wrong", true, timing(1.0), fail, &l),
            Entry::new(shape, "sm90", true, timing(5.0), exact(), &l),
            Entry::new(shape, CUBLAS_F16, false, timing(10.0), Check::loose(0.5, 0), &l),
            Entry::new(shape, CUBLASLT_FP8, false, timing(10.0), Check::loose(1e-6, 0), &l),
        ];
        rank(&mut entries);
        assert!(!entries[0].best && entries[1].best);
        assert_eq!(entries[2].speedup_of_best, None);
        assert_eq!(entries[3].speedup_of_best, Some(2.0));
    }

    #[test]
    fn geomean_rows_cover_the_three_gpumode_shapes_only() {
        let r = sample_report();
        let names: Vec<&str> = r.geomean.iter().map(|g| g.implementation.as_str()).collect();
        assert_eq!(names, [OUR_BEST, "naive", "sm90", CUBLAS_F16, CUBLASLT_FP8, DEQUANT_CUBLAS]);
        let sm90 = &r.geomean[2];
        let want = (291.84f64 * 131.17 * 42.48).powf(1.0 / 3.0);
        assert!((sm90.median_us - want).abs() < 1e-6 * want, "{} vs {want}", sm90.median_us);
        assert_eq!(r.geomean[0].median_us, sm90.median_us, "sm90 is the best on every shape");
        let fp8 = &r.geomean[4];
        let want = (56.0 / 291.84 * 19.9 / 131.17 * 13.5 / 42.48f64).powf(1.0 / 3.0);
        assert!((fp8.speedup_of_best.unwrap() - want).abs() < 1e-9);
        // Without all three shapes there is no geomean.
        let partial: Vec<Entry> = r.entries.iter().filter(|e| e.shape != "128x4096x7168").cloned().collect();
        assert!(geomean_rows(&partial).is_empty());
        assert_eq!(geomean(&[]), None);
        assert_eq!(geomean(&[4.0, 0.0]), None);
        assert!((geomean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
    }

    #[test]
    fn the_table_has_a_header_one_line_per_row_and_the_geomean() {
        let r = sample_report();
        let text = r.text();
        println!("{text}");
        assert!(text.starts_with(
            "bench    NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 1980 MHz), driver for CUDA 13.0, 2026-11-23"
        ));
        assert!(text.contains(
            "limits   measured now: device copy 3000 GB/s (1.00 GiB read + written); cuBLAS fp16 GEMM 700.0 TFLOP/s"
        ));
        for e in &r.entries {
            let line = text
                .lines()
                .find(|l| l.starts_with(&e.shape) && l.contains(&e.implementation))
                .unwrap_or_else(|| panic!("no line for {} {}", e.shape, e.implementation));
            assert!(line.contains(&format!("{:.2}", e.median_us)), "{line}");
        }
        assert_eq!(text.lines().filter(|l| l.starts_with("geomean (3)")).count(), r.geomean.len());
        let fp16 = text.lines().find(|l| l.starts_with("128x7168x16384") && l.contains(CUBLAS_F16)).unwrap();
        assert!(fp16.contains("rel 2.0e-6") && fp16.trim_end().ends_with("0.35x"), "{fp16}");
        let sm90 = text.lines().find(|l| l.starts_with("128x7168x16384") && l.contains("ours: sm90")).unwrap();
        assert!(sm90.contains("exact") && sm90.trim_end().ends_with("best"), "{sm90}");
    }

    #[test]
    fn skipped_baselines_are_one_line_each() {
        let mut r = sample_report();
        r.skipped.push(Skip {
            shape: None,
            implementation: CUBLAS_F16.into(),
            reason: "libcublas could not be loaded (...)".into(),
        });
        r.skipped.push(Skip {
            shape: Some("128x4096x7168".into()),
            implementation: CUBLASLT_FP8.into(),
            reason: "no algorithm".into(),
        });
        let text = r.text();
        assert!(
            text.contains("skipped  cuBLAS fp16, pre-dequantized: libcublas could not be loaded (...)\n"),
            "{text}"
        );
        assert!(text.contains("skipped  cuBLASLt FP8 e4m3 on 128x4096x7168: no algorithm\n"), "{text}");
    }

    #[test]
    fn json_carries_everything() {
        let mut r = sample_report();
        r.read_floors.push(ReadFloor { shape: "128x7168x2048".into(), bytes: 8_290_304, median_us: 8.5, gbps: 975.0 });
        let v: serde_json::Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(v["entries"].as_array().unwrap().len(), 20);
        assert_eq!(v["entries"][1]["implementation"], "sm90");
        assert_eq!(v["entries"][1]["best"], true);
        assert!(v["entries"][1]["timing"]["samples_us"].as_array().unwrap().len() == 3);
        assert_eq!(v["limits"]["copy_gbps"], 3000.0);
        assert_eq!(v["geomean"][0]["implementation"], OUR_BEST);
        assert_eq!(v["device"]["name"], "NVIDIA H100 80GB HBM3");
        assert_eq!(v["read_floors"][0]["median_us"], 8.5);
        assert!(v["entries"][0]["of_read"].is_null());
    }

    #[test]
    fn utc_timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc_timestamp(1_795_460_400), "2026-11-23 19:00 UTC");
        assert_eq!(utc_timestamp(1_795_460_400 + 86_399), "2026-11-24 18:59 UTC");
    }

    #[test]
    fn random_limit_data_is_never_all_zero() {
        let v = random_f16(1 << 17, 3);
        let zeros = v.iter().filter(|&&b| b & 0x7FFF == 0).count();
        assert!(zeros < v.len() / 1000, "{zeros}");
        assert!(v.iter().all(|&b| f16::from_bits(b).to_f32().abs() <= 1.0));
    }
}
