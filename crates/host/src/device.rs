//! The GPU: opening it safely (no panic when the driver is missing), its properties,
//! and the hardware limits the report compares against.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaStream};
use serde::Serialize;

use crate::error::{CudaContext as _, Error, Result};

/// What the report and the kernel choice need to know about a GPU.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    pub multiprocessors: u32,
    /// Peak SM clock (the boost clock the driver reports), MHz.
    pub sm_clock_mhz: f64,
    /// Memory clock, MHz, and bus width, bits: peak bandwidth = 2 * clock * width / 8.
    pub memory_clock_mhz: f64,
    pub memory_bus_bits: u32,
    pub l2_bytes: u64,
    pub memory_bytes: u64,
    /// Largest dynamic shared memory a CTA may opt into.
    pub max_shared_per_block: u32,
    /// CUDA version the driver supports, e.g. (13, 0).
    pub driver_cuda_version: (u32, u32),
}

impl DeviceInfo {
    /// Peak DRAM bandwidth, bytes/s (double data rate over the whole bus).
    pub fn peak_bandwidth(&self) -> f64 {
        2.0 * self.memory_clock_mhz * 1e6 * self.memory_bus_bits as f64 / 8.0
    }

    /// The device's arithmetic peak for a unit doing `flop_per_clk_per_sm`, FLOP/s.
    pub fn peak_flops(&self, flop_per_clk_per_sm: f64) -> f64 {
        flop_per_clk_per_sm * self.multiprocessors as f64 * self.sm_clock_mhz * 1e6
    }
}

/// Whether the CUDA driver library can be loaded at all (cudarc panics on first use
/// when it cannot, so every GPU entry point asks this first).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// An open GPU: its context, the stream everything runs on, its properties.
#[derive(Debug)]
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: DeviceInfo,
}

impl Gpu {
    /// Opens GPU `ordinal`.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        let count = CudaContext::device_count().map_err(|e| Error::NoGpu(e.to_string()))?;
        if count <= 0 {
            return Err(Error::NoGpu("0 devices".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::Usage(format!("GPU {ordinal} does not exist: this machine has {count}")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::NoGpu(e.to_string()))?;
        // The kernels take raw device addresses: no per-buffer event tracking needed, and
        // none inside the timed region.
        // SAFETY: everything runs on one stream.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let attr = |a: Attr| ctx.attribute(a).context(format!("reading {a:?}"));
        let (major, minor) = ctx.compute_capability().context("reading the compute capability")?;
        let mut version = 0i32;
        // SAFETY: writes one int.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
            .result()
            .context("reading the driver version")?;
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().context("reading the device name")?,
            compute_capability: (major as u32, minor as u32),
            multiprocessors: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            sm_clock_mhz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as f64 / 1e3,
            memory_clock_mhz: attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as f64 / 1e3,
            memory_bus_bits: attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            memory_bytes: ctx.total_mem().context("reading the memory size")? as u64,
            max_shared_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32,
            driver_cuda_version: (version as u32 / 1000, (version as u32 % 1000) / 10),
        };
        Ok(Gpu { ctx, stream, info })
    }

    /// (free, total) device memory in bytes.
    pub fn memory(&self) -> Result<(u64, u64)> {
        let (free, total) = self.ctx.mem_get_info().context("reading free memory")?;
        Ok((free as u64, total as u64))
    }
}
