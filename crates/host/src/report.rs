//! What a run prints and writes: one clear block for people, one JSON object for tools.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::device::DeviceInfo;
use crate::error::{Error, Result};
use crate::gemm::Timing;
use crate::kernels::Kernel;
use crate::verify::Comparison;
use nvfp4::Shape;

/// How a result was checked.
#[derive(Clone, Debug, Serialize)]
pub struct Verification {
    /// `cpu` (exact reference), `gpu` (the naive kernel) or `emulator`.
    pub against: &'static str,
    pub elements: u64,
    pub mismatches: u64,
    pub nan_mismatches: u64,
    pub unwritten: u64,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    pub max_ulps: u32,
    /// C's type, the unit of `max_ulps`: `fp16` or `bf16`.
    pub dtype: &'static str,
    pub bit_exact: bool,
    pub passed: bool,
    pub first_mismatch: Option<String>,
}

impl Verification {
    pub fn new(
        against: &'static str,
        c: &Comparison,
        unwritten: u64,
        dtype: nvfp4::epilogue::OutDtype,
    ) -> Verification {
        Verification {
            against,
            elements: c.elements,
            mismatches: c.mismatches,
            nan_mismatches: c.nan_mismatches,
            unwritten,
            max_abs_err: c.max_abs_err,
            max_rel_err: c.max_rel_err,
            max_ulps: c.max_ulps,
            dtype: match dtype {
                nvfp4::epilogue::OutDtype::F16 => "fp16",
                nvfp4::epilogue::OutDtype::Bf16 => "bf16",
            },
            bit_exact: c.bit_exact,
            passed: c.passed() && unwritten == 0,
            first_mismatch: c.first_mismatch.as_ref().map(|m| m.to_string()),
        }
    }
}

/// Speed against the device's limits.
#[derive(Clone, Debug, Serialize)]
pub struct Speed {
    pub tflops: f64,
    pub peak_tflops: f64,
    pub peak_unit: &'static str,
    pub gbps: f64,
    pub peak_gbps: f64,
    /// max(FLOP / peak FLOP/s, bytes / peak bandwidth): no kernel on this unit can beat it.
    pub speed_of_light_us: f64,
    pub bound: &'static str,
    /// speed_of_light / measured.
    pub fraction_of_limit: f64,
}

impl Speed {
    pub fn new(shape: Shape, kernel: Kernel, device: &DeviceInfo, median_us: f64) -> Speed {
        let (flop_per_clk, unit) = kernel.unit_flop_per_clk_per_sm(device.compute_capability);
        let peak_flops = device.peak_flops(flop_per_clk);
        let peak_bw = device.peak_bandwidth();
        let seconds = median_us * 1e-6;
        let compute_us = shape.flops() / peak_flops * 1e6;
        let memory_us = (shape.bytes_read() + shape.c_bytes()) as f64 / peak_bw * 1e6;
        Speed {
            tflops: shape.flops() / seconds / 1e12,
            peak_tflops: peak_flops / 1e12,
            peak_unit: unit,
            gbps: shape.bytes_read() as f64 / seconds / 1e9,
            peak_gbps: peak_bw / 1e9,
            speed_of_light_us: compute_us.max(memory_us),
            bound: if compute_us >= memory_us { "compute" } else { "memory" },
            fraction_of_limit: compute_us.max(memory_us) / median_us,
        }
    }
}

/// Everything one `host` run found.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub device: Option<DeviceInfo>,
    pub emulated: bool,
    pub shape: String,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub l: u32,
    pub inputs: String,
    pub kernel: Kernel,
    pub launch: String,
    pub gflop: f64,
    pub bytes_read: u64,
    pub verification: Option<Verification>,
    pub timing: Option<Timing>,
    pub speed: Option<Speed>,
    /// Emulated instruction counts (emulated runs only).
    pub instructions: Option<std::collections::BTreeMap<&'static str, u64>>,
    pub emulation_seconds: Option<f64>,
}

impl RunReport {
    /// The human-readable block.
    pub fn text(&self) -> String {
        let mut s = String::new();
        match &self.device {
            Some(d) => {
                let _ = writeln!(
                    s,
                    "device   {} (sm_{}{}, {} SMs, {:.0} MHz, {:.0} GB/s peak), driver for CUDA {}.{}",
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    d.multiprocessors,
                    d.sm_clock_mhz,
                    d.peak_bandwidth() / 1e9,
                    d.driver_cuda_version.0,
                    d.driver_cuda_version.1
                );
            }
            None => {
                let _ = writeln!(s, "device   CPU emulator (every PTX instruction modelled; no timing)");
            }
        }
        let _ = writeln!(
            s,
            "problem  {} ({}), {:.2} GFLOP, {:.1} MB to read",
            self.shape,
            self.inputs,
            self.gflop,
            self.bytes_read as f64 / 1e6
        );
        let _ = writeln!(s, "kernel   {}: {} [{}]", self.kernel, self.kernel.summary(), self.launch);
        match &self.verification {
            Some(v) => {
                let _ = writeln!(
                    s,
                    "verify   {} against {}: {} elements, {} mismatches (rtol = atol = 1e-3), {} NaN mismatches, {} unwritten",
                    if v.passed { "PASS" } else { "FAIL" },
                    match v.against {
                        "cpu" => "the exact CPU reference",
                        "gpu" => "the naive GPU kernel",
                        other => other,
                    },
                    v.elements,
                    v.mismatches,
                    v.nan_mismatches,
                    v.unwritten
                );
                let _ = writeln!(
                    s,
                    "         worst abs err {:.3e}, worst rel err {:.3e}, worst {} {} ulp{}",
                    v.max_abs_err,
                    v.max_rel_err,
                    v.max_ulps,
                    v.dtype,
                    if v.bit_exact { " (bit-exact)" } else { "" }
                );
                if let Some(m) = &v.first_mismatch {
                    let _ = writeln!(s, "         first mismatch: {m}");
                }
            }
            None => {
                let _ = writeln!(s, "verify   skipped (--verify none)");
            }
        }
        if let (Some(t), Some(sp)) = (&self.timing, &self.speed) {
            let _ = writeln!(
                s,
                "time     median {:.2} us over {} runs (min {:.2}, max {:.2}), L2 flushed before each, CUDA events",
                t.median_us,
                t.samples_us.len(),
                t.min_us,
                t.max_us
            );
            let _ = writeln!(
                s,
                "speed    {:.1} TFLOP/s = {:.1}% of {:.1} TFLOP/s ({}); {:.0} GB/s read = {:.1}% of {:.0} GB/s",
                sp.tflops,
                100.0 * sp.tflops / sp.peak_tflops,
                sp.peak_tflops,
                sp.peak_unit,
                sp.gbps,
                100.0 * sp.gbps / sp.peak_gbps,
                sp.peak_gbps
            );
            let _ = writeln!(
                s,
                "limit    speed of light {:.2} us ({}-bound on this unit); this run reaches {:.1}% of it",
                sp.speed_of_light_us,
                sp.bound,
                100.0 * sp.fraction_of_limit
            );
        }
        if let Some(counts) = &self.instructions {
            let total: u64 = counts.values().sum();
            let mut top: Vec<_> = counts.iter().collect();
            top.sort_by(|a, b| b.1.cmp(a.1));
            let list: Vec<String> = top.iter().take(6).map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(
                s,
                "emulated {total} modelled instructions in {:.2} s: {}",
                self.emulation_seconds.unwrap_or(0.0),
                list.join(", ")
            );
        }
        s
    }
}

/// Writes any report as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Error::Failed(format!("serialising the report: {e}")))?;
    std::fs::write(path, text + "\n").map_err(|e| Error::Usage(format!("cannot write {}: {e}", path.display())))
}
