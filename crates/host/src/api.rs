//! The GEMM as a library call on the caller's memory and stream: what a serving stack (or
//! the Python package) calls inside a model's forward pass.
//!
//! ```no_run
//! # fn main() -> Result<(), host::Error> {
//! use host::api::{Alpha, Epilogue, Gemms, Operands};
//! use nvfp4::epilogue::OutDtype;
//! let gemms = Gemms::for_device(0)?; // loaded once per device, picked by compute capability
//! let shape = "128x7168x16384".parse().unwrap();
//! # let (a, b, sfa, sfb, c, stream) = (0, 0, 0, 0, 0, std::ptr::null_mut());
//! let epilogue = Epilogue { alpha: Alpha::Scalar(0.5), bias: 0, out: OutDtype::Bf16 };
//! let workspace = 0; // gemms.workspace_bytes(shape) bytes, zero-filled once, when not 0
//! // SAFETY: the addresses are device allocations of the sizes the shape implies.
//! let ops = Operands { a, b, sfa, sfb, c, a_format: host::api::AFormat::Nvfp4 };
//! unsafe { gemms.enqueue(stream, &ops, shape, &epilogue, workspace)? };
//! # Ok(()) }
//! ```
//!
//! Nothing here allocates, copies or synchronizes: [`Gemms::enqueue`] checks its arguments
//! and puts the kernel's launches on the stream, in order. The kernels live in the primary
//! context of their device, the one PyTorch and the CUDA runtime use, so the addresses of
//! tensors allocated there are valid as they are.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// The driver's stream handle (`CUstream`, what `torch.cuda.Stream.cuda_stream` holds).
pub use cudarc::driver::sys::CUstream;
use cudarc::driver::sys::{self, CUfunction_attribute as FuncAttr};
use cudarc::driver::{CudaContext, CudaFunction};
use kernel::GemmArgs;
use nvfp4::Shape;
use nvfp4::epilogue::OutDtype;
pub use nvfp4::operand::AFormat;

use crate::device::DeviceInfo;
use crate::embedded;
use crate::error::{CudaContext as _, Error, Result};
use crate::kernels::{Kernel, KernelChoice};

/// The fp32 scale of the epilogue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Alpha {
    Scalar(f32),
    /// The device address of one f32, read when the kernel runs (a CUDA graph captures the
    /// address, and every replay reads the value the tensor holds then).
    Device(u64),
}

/// `C = round(alpha · A·Bᵀ + bias)`, see [`nvfp4::epilogue`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Epilogue {
    pub alpha: Alpha,
    /// Device address of N values of C's type, or 0 for no bias.
    pub bias: u64,
    pub out: OutDtype,
}

impl Epilogue {
    /// alpha 1, no bias, fp16.
    pub const IDENTITY: Epilogue = Epilogue { alpha: Alpha::Scalar(1.0), bias: 0, out: OutDtype::F16 };
}

/// Device addresses of the operands, in the layouts of [`kernel::GemmArgs`]: `a` [L][M][K/2]
/// packed e2m1 (or [L][M][K] fp16 when `a_format` is [`AFormat::F16`], W4A16, `sfa` then
/// unused), `b` [L][N][K/2] packed e2m1, `sfa`/`sfb` blocked e4m3 scales, `c` [L][M][N].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operands {
    pub a: u64,
    pub b: u64,
    pub sfa: u64,
    pub sfb: u64,
    pub c: u64,
    pub a_format: AFormat,
}

/// Alignment the kernels' vector loads and stores need of every operand, in bytes.
pub const OPERAND_ALIGN: u64 = 16;

/// One kernel loaded in one context, with every entry point of its launches.
#[derive(Debug)]
pub struct Gemms {
    ctx: Arc<CudaContext>,
    kernel: Kernel,
    info: DeviceInfo,
    functions: Vec<(&'static str, CudaFunction)>,
}

// SAFETY: the context and function handles are plain driver handles, valid from any thread
// once the context is current (`enqueue` binds it); nothing here is mutated after `load`.
unsafe impl Send for Gemms {}
// SAFETY: as above: every method takes `&self` and only reads.
unsafe impl Sync for Gemms {}

impl Gemms {
    /// The best kernel for GPU `ordinal`, loaded in its primary context the first time it
    /// is asked for and shared afterwards.
    pub fn for_device(ordinal: usize) -> Result<Arc<Gemms>> {
        static LOADED: OnceLock<Mutex<HashMap<usize, Arc<Gemms>>>> = OnceLock::new();
        let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = loaded.get(&ordinal) {
            return Ok(g.clone());
        }
        let gpu = crate::Gpu::open(ordinal)?;
        let kernel = KernelChoice::Auto.resolve(Some(gpu.info.compute_capability));
        let gemms = Arc::new(Gemms::load(gpu.ctx.clone(), gpu.info.clone(), kernel)?);
        loaded.insert(ordinal, gemms.clone());
        Ok(gemms)
    }

    /// Loads `kernel` in `ctx` (after checking the device can run it).
    pub fn load(ctx: Arc<CudaContext>, info: DeviceInfo, kernel: Kernel) -> Result<Gemms> {
        kernel.check_device(&info)?;
        let (target, entry) = kernel.ptx();
        let module = embedded::load_module(&ctx, target)?;
        let mut functions = Vec::new();
        for step in kernel.every_step(info.multiprocessors) {
            if functions.iter().any(|(entry, _)| *entry == step.entry) {
                continue;
            }
            let function = module.load_function(step.entry).context(format!("finding kernel {}", step.entry))?;
            let smem = step.launch.dynamic_smem;
            if smem > 48 * 1024 {
                function
                    .set_attribute(FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)
                    .context(format!("allowing {smem} bytes of shared memory for {}", step.entry))?;
            }
            functions.push((step.entry, function));
        }
        debug_assert!(functions.iter().any(|f| f.0 == entry));
        Ok(Gemms { ctx, kernel, info, functions })
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }

    /// Bytes of scratch a call on `shape` needs on this GPU (0 for most shapes and kernels;
    /// sm90v2's split K, and so its partials, follow the GPU's SM count). It must be
    /// zero-filled before its first use; every call leaves it so, so one buffer serves any
    /// number of calls in stream order (not two calls running at once on two streams).
    pub fn workspace_bytes(&self, shape: Shape) -> u64 {
        self.kernel.workspace_bytes(shape, self.info.multiprocessors)
    }

    /// Whether the workspace must be zero-filled before its first call (false: any
    /// contents will do, e.g. a fresh uninitialized allocation per call).
    pub fn workspace_starts_zeroed(&self) -> bool {
        self.kernel.workspace_starts_zeroed()
    }

    /// Enqueues `C = epilogue(A·Bᵀ)` on `stream` (null: the legacy default stream) and
    /// returns without waiting. Checks every argument first and refuses what a kernel
    /// would misread (null or misaligned addresses, a missing workspace, a non-finite
    /// alpha) with [`Error::Invalid`].
    ///
    /// # Safety
    ///
    /// `ops` must point to device allocations of this context holding at least the bytes
    /// `shape` implies (`a_bytes`, `b_bytes`, `sfa_bytes`, `sfb_bytes`, `c_bytes`), the
    /// bias N values, `Alpha::Device` one f32, `workspace` [`Gemms::workspace_bytes`]
    /// zero-filled bytes; they must stay valid until the launches complete, and `stream`
    /// must be a stream of this context (or null).
    pub unsafe fn enqueue(
        &self,
        stream: CUstream,
        ops: &Operands,
        shape: Shape,
        epilogue: &Epilogue,
        workspace: u64,
    ) -> Result<()> {
        let sms = self.info.multiprocessors;
        let args = kernel_args(self.kernel, ops, shape, epilogue, workspace, sms)?;
        self.ctx.bind_to_thread().context("making the GPU's context current")?;
        for step in self.kernel.steps(shape, sms, ops.a_format) {
            let function = &self.functions.iter().find(|f| f.0 == step.entry).expect("loaded in `load`").1;
            // SAFETY: the caller vouches for the addresses and the stream; the parameters
            // are the entry point's, in its order.
            unsafe { launch(function, step.launch, step.programmatic, stream, &args) }
                .context(format!("launching {}", step.entry))?;
        }
        Ok(())
    }
}

/// The arguments of a call of `kernel` on a GPU with `sms` SMs, after checking them (see
/// [`Gemms::enqueue`]).
pub fn kernel_args(
    kernel: Kernel,
    ops: &Operands,
    shape: Shape,
    epilogue: &Epilogue,
    workspace: u64,
    sms: u32,
) -> Result<GemmArgs> {
    let invalid = |what: String| Err(Error::Invalid(what));
    if !kernel.takes(ops.a_format) {
        return invalid(format!(
            "{kernel} takes A as NVFP4 only; 16-bit activations (W4A16, fp16 or bf16) run on {}",
            Kernel::w4a16_kernels()
        ));
    }
    let w4a16 = ops.a_format.is_16bit();
    for (name, addr) in [("a", ops.a), ("b", ops.b), ("sfa", ops.sfa), ("sfb", ops.sfb), ("c", ops.c)] {
        if name == "sfa" && w4a16 {
            continue; // fp16 activations have no scales
        }
        if addr == 0 {
            return invalid(format!("`{name}` is a null device address"));
        }
        if !addr.is_multiple_of(OPERAND_ALIGN) {
            return invalid(format!(
                "`{name}` at {addr:#x} is not {OPERAND_ALIGN}-byte aligned (the kernels load and store 16 bytes at a time)"
            ));
        }
    }
    let needed = kernel.workspace_bytes(shape, sms);
    if needed > 0 && (workspace == 0 || !workspace.is_multiple_of(OPERAND_ALIGN)) {
        return invalid(format!(
            "{} needs a {OPERAND_ALIGN}-byte aligned, zero-filled workspace of {needed} bytes for {shape}, got address {workspace:#x}",
            kernel
        ));
    }
    if !epilogue.bias.is_multiple_of(2) {
        return invalid(format!("the bias at {:#x} is not 2-byte aligned", epilogue.bias));
    }
    let (alpha, alpha_ptr) = match epilogue.alpha {
        Alpha::Scalar(a) if !a.is_finite() => return invalid(format!("alpha must be finite, got {a}")),
        Alpha::Scalar(a) => (a, 0),
        Alpha::Device(0) => return invalid("alpha is a null device address".into()),
        Alpha::Device(p) if !p.is_multiple_of(4) => {
            return invalid(format!("alpha at {p:#x} is not 4-byte aligned"));
        }
        // By value NaN: a kernel that ignored the pointer would show it at once.
        Alpha::Device(p) => (f32::NAN, p),
    };
    Ok(GemmArgs {
        a: ops.a,
        b: ops.b,
        sfa: ops.sfa,
        sfb: ops.sfb,
        c: ops.c,
        workspace,
        m: shape.m,
        n: shape.n,
        k: shape.k,
        l: shape.l,
        alpha,
        alpha_ptr,
        bias: epilogue.bias,
        out_dtype: epilogue.out.code(),
        a_format: ops.a_format.code(),
        sms,
    })
}

/// One `cuLaunchKernelEx` of a GEMM entry point: its parameters are [`GemmArgs`]' fields,
/// in order, each passed by address; `programmatic` adds the programmatic stream
/// serialization attribute (the launch may begin before the previous one in the stream
/// completes, see `kernel::ptx::griddep`).
///
/// # Safety
///
/// As for [`Gemms::enqueue`].
unsafe fn launch(
    function: &CudaFunction,
    l: kernel::Launch,
    programmatic: bool,
    stream: CUstream,
    args: &GemmArgs,
) -> Result<(), cudarc::driver::DriverError> {
    fn param<T>(p: &mut T) -> *mut c_void {
        p as *mut T as *mut c_void
    }
    let mut a = *args;
    let mut params = [
        param(&mut a.a),
        param(&mut a.b),
        param(&mut a.sfa),
        param(&mut a.sfb),
        param(&mut a.c),
        param(&mut a.workspace),
        param(&mut a.m),
        param(&mut a.n),
        param(&mut a.k),
        param(&mut a.l),
        param(&mut a.alpha),
        param(&mut a.alpha_ptr),
        param(&mut a.bias),
        param(&mut a.out_dtype),
        param(&mut a.a_format),
        param(&mut a.sms),
    ];
    // SAFETY: the attribute is plain data; reading the union's field that was written.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: l.grid[0],
        gridDimY: l.grid[1],
        gridDimZ: l.grid[2],
        blockDimX: l.block[0],
        blockDimY: l.block[1],
        blockDimZ: l.block[2],
        sharedMemBytes: l.dynamic_smem,
        hStream: stream,
        attrs: &mut attribute,
        numAttrs: programmatic as u32,
    };
    // SAFETY: `params` holds one pointer per entry-point parameter, each to a value of the
    // parameter's type that outlives the call (the driver copies them before returning);
    // `config` and its attribute outlive the call too.
    unsafe { sys::cuLaunchKernelEx(&config, function.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMS: u32 = crate::kernels::H100_SXM_SMS;

    const OPS: Operands =
        Operands { a: 0x1000, b: 0x2000, sfa: 0x3000, sfb: 0x4000, c: 0x5000, a_format: AFormat::Nvfp4 };

    fn shape(text: &str) -> Shape {
        text.parse().unwrap()
    }

    fn refused(kernel: Kernel, ops: &Operands, e: &Epilogue, workspace: u64, shape_text: &str) -> String {
        match kernel_args(kernel, ops, shape(shape_text), e, workspace, SMS) {
            Err(Error::Invalid(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn arguments_become_the_kernel_parameters() {
        let e = Epilogue { alpha: Alpha::Scalar(0.25), bias: 0x6000, out: OutDtype::Bf16 };
        let args = kernel_args(Kernel::Naive, &OPS, shape("3x5x64x2"), &e, 0, SMS).unwrap();
        assert_eq!((args.a, args.b, args.sfa, args.sfb, args.c), (0x1000, 0x2000, 0x3000, 0x4000, 0x5000));
        assert_eq!((args.m, args.n, args.k, args.l), (3, 5, 64, 2));
        assert_eq!((args.alpha, args.alpha_ptr, args.bias, args.out_dtype), (0.25, 0, 0x6000, 1));
        assert_eq!(args.sms, SMS);
        let e = Epilogue { alpha: Alpha::Device(0x7004), ..Epilogue::IDENTITY };
        let args = kernel_args(Kernel::Naive, &OPS, shape("3x5x64"), &e, 0, SMS).unwrap();
        assert!(args.alpha.is_nan(), "by value NaN when alpha lives in memory");
        assert_eq!((args.alpha_ptr, args.bias, args.out_dtype), (0x7004, 0, 0));
    }

    #[test]
    fn what_a_kernel_would_misread_is_refused() {
        let id = Epilogue::IDENTITY;
        let why = refused(Kernel::Naive, &Operands { b: 0, ..OPS }, &id, 0, "3x5x64");
        assert_eq!(why, "`b` is a null device address");
        let why = refused(Kernel::Naive, &Operands { c: 0x5008, ..OPS }, &id, 0, "3x5x64");
        assert!(why.contains("`c` at 0x5008 is not 16-byte aligned"), "{why}");
        let why = refused(Kernel::Naive, &OPS, &Epilogue { alpha: Alpha::Scalar(f32::NAN), ..id }, 0, "3x5x64");
        assert_eq!(why, "alpha must be finite, got NaN");
        let why = refused(Kernel::Naive, &OPS, &Epilogue { alpha: Alpha::Device(0), ..id }, 0, "3x5x64");
        assert_eq!(why, "alpha is a null device address");
        let why = refused(Kernel::Naive, &OPS, &Epilogue { alpha: Alpha::Device(0x7002), ..id }, 0, "3x5x64");
        assert!(why.contains("not 4-byte aligned"), "{why}");
        let why = refused(Kernel::Naive, &OPS, &Epilogue { bias: 0x6001, ..id }, 0, "3x5x64");
        assert!(why.contains("bias at 0x6001 is not 2-byte aligned"), "{why}");
        // sm90v2 always needs its workspace (the activations' fp16 images).
        let need = Kernel::Sm90v2.workspace_bytes(shape("128x256x512"), SMS);
        assert!(need > 0);
        let why = refused(Kernel::Sm90v2, &OPS, &id, 0, "128x256x512");
        assert!(why.contains(&format!("zero-filled workspace of {need} bytes")), "{why}");
        assert!(kernel_args(Kernel::Sm90v2, &OPS, shape("128x256x512"), &id, 0x8000, SMS).is_ok());
        // fp16 activations: sm90v2 only, and SFA may be null there.
        let w4a16 = Operands { a_format: AFormat::F16, sfa: 0, ..OPS };
        let why = refused(Kernel::Sm90, &w4a16, &id, 0, "128x256x512");
        assert!(
            why.contains("sm90 takes A as NVFP4 only; 16-bit activations (W4A16, fp16 or bf16) run on sm90v2"),
            "{why}"
        );
        let args = kernel_args(Kernel::Sm90v2, &w4a16, shape("128x256x512"), &id, 0x8000, SMS).unwrap();
        assert_eq!((args.a_format, args.sfa), (1, 0));
    }
}
