//! Running a kernel on the GPU: the library API the CLI uses.
//!
//! ```no_run
//! # fn main() -> Result<(), host::Error> {
//! use host::{Gpu, Gemm, Kernel, generate::{generate, Distribution}};
//! let gpu = Gpu::open(0)?;
//! let problem = generate("128x7168x16384".parse().unwrap(), Distribution::GpuMode, 1);
//! let gemm = Gemm::new(&gpu, Kernel::Naive)?;
//! let c = gemm.run(&mut gemm.upload(&problem)?)?; // C's bits in the epilogue's type (fp16 here), [L][M][N]
//! # Ok(()) }
//! ```

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, DevicePtr};
use nvfp4::Shape;

use crate::api::{Alpha, Epilogue as ApiEpilogue, Gemms, Operands};
use crate::device::Gpu;
use crate::error::{CudaContext as _, Error, Result};
use crate::kernels::Kernel;
use crate::problem::{Epilogue, Output, Problem};
use nvfp4::operand::AFormat;

/// A problem's buffers in GPU memory.
#[derive(Debug)]
pub struct DeviceProblem {
    pub shape: Shape,
    a: CudaSlice<u8>,
    b: CudaSlice<u8>,
    sfa: CudaSlice<u8>,
    sfb: CudaSlice<u8>,
    c: CudaSlice<u16>,
    a_format: AFormat,
    epilogue: Epilogue,
    /// alpha in GPU memory, when the epilogue asks for it there.
    alpha: Option<CudaSlice<f32>>,
    bias: Option<CudaSlice<u16>>,
    /// Scratch for kernels that split K (zero-filled when allocated; kernels leave it so),
    /// allocated at the first launch that needs it.
    workspace: Option<CudaSlice<u8>>,
}

/// One kernel, loaded on one GPU.
#[derive(Debug)]
pub struct Gemm<'g> {
    gpu: &'g Gpu,
    /// The kernel's entry points; every launch goes through [`Gemms::enqueue`], the
    /// library call on caller memory.
    gemms: Gemms,
}

/// Kernel times over repeated launches.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Timing {
    pub samples_us: Vec<f64>,
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
}

impl<'g> Gemm<'g> {
    /// Loads `kernel` on `gpu`, after checking the GPU can run it.
    pub fn new(gpu: &'g Gpu, kernel: Kernel) -> Result<Gemm<'g>> {
        Ok(Gemm { gpu, gemms: Gemms::load(gpu.ctx.clone(), gpu.info.clone(), kernel)? })
    }

    pub fn kernel(&self) -> Kernel {
        self.gemms.kernel()
    }

    /// Bytes of GPU memory `shape` needs, and what they are.
    pub fn memory_needed(shape: Shape, extra: u64) -> (u64, String) {
        let inputs = shape.a_bytes() + shape.b_bytes() + shape.sfa_bytes() + shape.sfb_bytes();
        let total = inputs + shape.c_bytes() + extra;
        (
            total,
            format!(
                "{:.1} MiB of inputs, {:.1} MiB of output, {:.1} MiB of scratch",
                mib(inputs),
                mib(shape.c_bytes()),
                mib(extra)
            ),
        )
    }

    /// Fails with a clear message when `needed` bytes do not fit in free GPU memory.
    pub fn check_memory(gpu: &Gpu, shape: Shape, extra: u64) -> Result<()> {
        let (needed, what) = Gemm::memory_needed(shape, extra);
        let (free, total) = gpu.memory()?;
        // Leave room for the context's own allocations (module, stack, launch state).
        let headroom = 256 << 20;
        if needed + headroom > free {
            return Err(Error::OutOfMemory {
                shape,
                what,
                needed_mib: mib(needed),
                free_mib: mib(free),
                total_mib: mib(total),
            });
        }
        Ok(())
    }

    /// Copies a problem to the GPU (checking it fits first).
    pub fn upload(&self, p: &Problem) -> Result<DeviceProblem> {
        // Scratch: the L2 flush buffer of `time`, and the largest kernel workspace.
        let sms = self.gpu.info.multiprocessors;
        let workspace = Kernel::ALL.iter().map(|k| k.workspace_bytes(p.shape, sms)).max().unwrap_or(0);
        Gemm::check_memory(self.gpu, p.shape, 2 * self.gpu.info.l2_bytes + workspace)?;
        let s = &self.gpu.stream;
        Ok(DeviceProblem {
            shape: p.shape,
            a: s.clone_htod(&p.a).context("copying A to the GPU")?,
            b: s.clone_htod(&p.b).context("copying B to the GPU")?,
            // W4A16 has no SFA: a few bytes nothing reads keep the buffer non-empty.
            sfa: match p.sfa.is_empty() {
                true => s.alloc_zeros::<u8>(16).context("allocating SFA")?,
                false => s.clone_htod(&p.sfa).context("copying SFA to the GPU")?,
            },
            sfb: s.clone_htod(&p.sfb).context("copying SFB to the GPU")?,
            c: s.alloc_zeros::<u16>(p.shape.c_bytes() as usize / 2).context("allocating C")?,
            a_format: p.a_format,
            epilogue: p.epilogue.clone(),
            alpha: match p.epilogue.alpha_in_memory {
                true => Some(s.clone_htod(&[p.epilogue.alpha]).context("copying alpha to the GPU")?),
                false => None,
            },
            bias: p
                .epilogue
                .bias
                .as_ref()
                .map(|b| s.clone_htod(b))
                .transpose()
                .context("copying the bias to the GPU")?,
            workspace: None,
        })
    }

    /// Enqueues the launches of one call (allocating the workspace at the first).
    pub fn launch(&self, d: &mut DeviceProblem) -> Result<()> {
        let s = &self.gpu.stream;
        let shape = d.shape;
        let needed = self.gemms.workspace_bytes(shape) as usize;
        if needed > 0 && d.workspace.as_ref().is_none_or(|w| w.len() < needed) {
            d.workspace = Some(s.alloc_zeros::<u8>(needed).context("allocating the workspace")?);
        }
        let ptr = |b: &CudaSlice<u8>| b.device_ptr(s).0;
        let ops = Operands {
            a: ptr(&d.a),
            b: ptr(&d.b),
            sfa: ptr(&d.sfa),
            sfb: ptr(&d.sfb),
            c: d.c.device_ptr(s).0,
            a_format: d.a_format,
        };
        let epilogue = ApiEpilogue {
            alpha: match &d.alpha {
                Some(a) => Alpha::Device(a.device_ptr(s).0),
                None => Alpha::Scalar(d.epilogue.alpha),
            },
            bias: d.bias.as_ref().map_or(0, |b| b.device_ptr(s).0),
            out: d.epilogue.out,
        };
        let workspace = d.workspace.as_ref().map_or(0, |w| w.device_ptr(s).0);
        // SAFETY: every buffer was allocated on this context with the sizes the shape
        // implies, and lives in `d`, which outlives the stream work (callers synchronize).
        unsafe { self.gemms.enqueue(s.cu_stream(), &ops, shape, &epilogue, workspace) }
    }

    /// Poisons C, runs the kernel once, and returns C ([L][M][N] in the epilogue's type).
    pub fn run(&self, d: &mut DeviceProblem) -> Result<Output> {
        let s = &self.gpu.stream;
        let poison = vec![d.epilogue.out.poison(); d.c.len()];
        s.memcpy_htod(&poison, &mut d.c).context("poisoning C")?;
        self.launch(d)?;
        s.synchronize().context(format!("running {}", self.kernel()))?;
        let bits = s.clone_dtoh(&d.c).context("copying C back")?;
        Ok(Output { dtype: d.epilogue.out, bits })
    }

    /// Median kernel time over `iters` launches, each after flushing L2 (a memset of
    /// twice its size), timed with CUDA events around the launch alone ([`Timer`], on a
    /// flush buffer of its own).
    pub fn time(&self, d: &mut DeviceProblem, iters: usize) -> Result<Timing> {
        Timer::named(self.gpu, format!("timing {}", self.kernel()))?.time(iters, || self.launch(d))
    }
}

/// Times calls on one L2 flush buffer (twice L2): two warm-up calls, then `iters` calls,
/// each after a memset of the buffer, with CUDA events around the call alone; returns the
/// samples' median. `host bench` times every contender, ours and the baselines, with one
/// `Timer`: the same flush buffer before each call.
#[derive(Debug)]
pub struct Timer<'g> {
    gpu: &'g Gpu,
    flush: CudaSlice<u8>,
    /// What a failure to synchronize after the timed calls reports.
    sync_failure: String,
}

impl<'g> Timer<'g> {
    pub fn new(gpu: &'g Gpu) -> Result<Timer<'g>> {
        Timer::named(gpu, "waiting for the timed calls".into())
    }

    /// A timer whose synchronize failure reports `sync_failure`.
    pub fn named(gpu: &'g Gpu, sync_failure: String) -> Result<Timer<'g>> {
        let flush =
            gpu.stream.alloc_zeros::<u8>(2 * gpu.info.l2_bytes as usize).context("allocating the L2 flush buffer")?;
        Ok(Timer { gpu, flush, sync_failure })
    }

    pub fn time(&mut self, iters: usize, mut call: impl FnMut() -> Result<()>) -> Result<Timing> {
        let s = &self.gpu.stream;
        let ctx = &self.gpu.ctx;
        for _ in 0..2 {
            call()?; // warm-up: module load, first-touch, clocks
        }
        let mut events = Vec::with_capacity(iters);
        for _ in 0..iters.max(1) {
            s.memset_zeros(&mut self.flush).context("flushing L2")?;
            let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).context("creating an event")?;
            let stop = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).context("creating an event")?;
            start.record(s).context("recording an event")?;
            call()?;
            stop.record(s).context("recording an event")?;
            events.push((start, stop));
        }
        s.synchronize().context(self.sync_failure.as_str())?;
        let mut samples_us = Vec::with_capacity(events.len());
        for (start, stop) in &events {
            samples_us.push(start.elapsed_ms(stop).context("reading an event")? as f64 * 1e3);
        }
        Ok(Timing::from_samples(samples_us))
    }
}

impl Timing {
    pub fn from_samples(samples_us: Vec<f64>) -> Timing {
        let mut sorted = samples_us.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median_us = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Timing { median_us, min_us: sorted[0], max_us: sorted[n - 1], samples_us }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
