//! The baselines a Hopper user would pick, through cudarc's cuBLAS and cuBLASLt bindings:
//! the fp16 GEMM (`cublasGemmEx`, fp32 accumulation) on operands already dequantized to
//! fp16, and the FP8 e4m3 GEMM (`cublasLtMatmul`, per-tensor scales).
//!
//! Both libraries are loaded dynamically, like the driver: the crate builds and its tests
//! run without them, and a missing library is an `Err` with one line saying what to
//! install, never a panic. cudarc looks only on the loader path, so when that fails the
//! usual homes of the libraries are tried too (`NVFP4_CUBLAS_DIR`, `$CUDA_HOME/lib64`,
//! `/usr/local/cuda/lib64`, the `nvidia-cublas` Python wheel): a library opened from there
//! by its full path is then found by cudarc under its soname.
//!
//! Layouts. Our operands are row-major A [M, K] and B [N, K], and C = A·Bᵀ is row-major
//! [M, N]. cuBLAS is column-major, where row-major C [M, N] is Cᵀ [N, M] = B·Aᵀ: so cuBLAS's
//! "A" is our B read as a K x N column-major matrix (ld = K) transposed, its "B" is our A
//! read as K x M (ld = K) not transposed, and its C is N x M with ld = N. That is the "TN"
//! layout, the one cuBLASLt's FP8 kernels require on Hopper (A transposed, B not), with K
//! a multiple of 16 and 16-byte aligned pointers and leading dimensions (NVFP4's K is a
//! multiple of 16; the FP8 output's leading dimension N * 2 bytes must be a multiple of 16
//! too, so N a multiple of 8, or cuBLASLt finds no algorithm and the baseline is skipped).
//!
//! The per-tensor scales are read by pointer, and cuBLASLt checks those pointers only in
//! `cublasLtMatmul`, not in its heuristic: with both scales in one 8-byte buffer (the second
//! at +4 bytes, 4-byte aligned) every algorithm the heuristic offered was refused with
//! `CUBLAS_STATUS_NOT_SUPPORTED` (H100, cuBLAS 13.1), and with each scale on its own
//! 256-byte boundary every one ran. So each scale sits [`SCALE_STRIDE`] floats apart.

use std::ffi::c_void;
use std::mem::size_of;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::OnceLock;

use cudarc::cublas::result as blas_result;
use cudarc::cublas::sys as blas;
use cudarc::cublaslt::result as lt_result;
use cudarc::cublaslt::sys as lt;
use cudarc::driver::{CudaSlice, DevicePtr};
use half::f16;
use nvfp4::e4m3;
use rayon::prelude::*;

use crate::device::Gpu;

/// Workspace handed to cuBLASLt (NVIDIA's recommendation for Hopper).
pub const LT_WORKSPACE_BYTES: usize = 32 << 20;

/// Floats between the two FP8 scales in their device buffer: 256 bytes, the alignment
/// cuBLASLt assumes of every pointer unless told otherwise (see the module docs).
pub const SCALE_STRIDE: usize = 64;

/// The FP8 scales' device buffer: our A's scale at 0, our B's at [`SCALE_STRIDE`].
pub fn scale_buffer(sa: f32, sb: f32) -> Vec<f32> {
    let mut v = vec![0.0; 2 * SCALE_STRIDE];
    v[0] = sa;
    v[SCALE_STRIDE] = sb;
    v
}

/// The alignment (bytes, at most 256: cuBLASLt's default assumption) that every batch's
/// pointer keeps when a 256-byte-aligned buffer is walked in strides of `stride_bytes`:
/// what the heuristic must be told for L > 1, or it may pick an algorithm that
/// `cublasLtMatmul` then refuses for the second batch.
pub fn batch_alignment(stride_bytes: u64, batches: u32) -> u32 {
    if batches <= 1 || stride_bytes == 0 { 256 } else { 1u32 << stride_bytes.trailing_zeros().min(8) }
}

/// Whether cuBLAS and cuBLASLt could be loaded: `Ok(where)` or `Err(why not)`.
#[derive(Clone, Debug)]
pub struct Libraries {
    pub cublas: Result<String, String>,
    pub cublaslt: Result<String, String>,
}

/// Loads both libraries once (cuBLASLt first: libcublas needs it).
pub fn libraries() -> &'static Libraries {
    static LIBRARIES: OnceLock<Libraries> = OnceLock::new();
    LIBRARIES.get_or_init(|| {
        // SAFETY: both only try to dlopen their library.
        let cublaslt = load("cublasLt", || unsafe { lt::is_culib_present() });
        let cublas = load("cublas", || unsafe { blas::is_culib_present() });
        Libraries { cublas, cublaslt }
    })
}

/// Folders where cuBLAS usually lives when it is not on the loader path.
fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("NVFP4_CUBLAS_DIR") {
        dirs.push(PathBuf::from(d));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(PathBuf::from(&d).join("lib64"));
            dirs.push(PathBuf::from(&d).join("lib"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    // The `nvidia-cublas` wheel (PyTorch's): site-packages/nvidia/{cu13,cublas}/lib.
    let python = std::process::Command::new("python3")
        .args(["-c", "import nvidia; print('\\n'.join(nvidia.__path__))"])
        .stderr(std::process::Stdio::null())
        .output();
    if let Ok(out) = python.as_ref()
        && out.status.success()
    {
        for root in String::from_utf8_lossy(&out.stdout).lines() {
            for sub in ["cu13/lib", "cublas/lib", "cu12/lib"] {
                dirs.push(PathBuf::from(root.trim()).join(sub));
            }
        }
    }
    dirs
}

/// Makes `lib{name}` loadable for cudarc: already on the loader path, or opened here by
/// full path from one of [`search_dirs`] and kept open (glibc then answers a later dlopen of
/// its soname with it).
fn load(name: &str, present: impl Fn() -> bool) -> Result<String, String> {
    if present() {
        return Ok("the loader path".into());
    }
    let dirs = search_dirs();
    #[cfg(unix)]
    for dir in &dirs {
        for file in [format!("lib{name}.so.13"), format!("lib{name}.so.12"), format!("lib{name}.so")] {
            let path = dir.join(file);
            if !path.is_file() {
                continue;
            }
            use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
            // SAFETY: loading a shared library runs its initialisers; cuBLAS's are benign.
            if let Ok(lib) = unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) } {
                std::mem::forget(lib); // kept open for the life of the process
                if present() {
                    return Ok(path.display().to_string());
                }
            }
        }
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "lib{name} could not be loaded (looked on the loader path and in {}); install the CUDA toolkit or \
         `pip install nvidia-cublas`, or set NVFP4_CUBLAS_DIR (or LD_LIBRARY_PATH) to the folder holding lib{name}.so.13",
        looked.join(", ")
    ))
}

/// Runs `f`, turning a panic inside cudarc (a symbol missing from an unexpected library
/// version) into an error, without the panic message on stderr.
pub fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    match result {
        Ok(r) => r,
        Err(payload) => Err(match (payload.downcast_ref::<String>(), payload.downcast_ref::<&str>()) {
            (Some(s), _) => format!("cuBLAS binding failed: {s}"),
            (_, Some(s)) => format!("cuBLAS binding failed: {s}"),
            _ => "cuBLAS binding failed".into(),
        }),
    }
}

/// The three GEMM dimensions as cuBLAS's `int`s.
fn dims(m: u32, n: u32, k: u32) -> Result<(i32, i32, i32), String> {
    let int = |v: u32, what: &str| i32::try_from(v).map_err(|_| format!("{what} = {v} exceeds cuBLAS's int range"));
    Ok((int(m, "M")?, int(n, "N")?, int(k, "K")?))
}

/// The column-major (cuBLAS) arguments that compute row-major C [M, N] = A [M, K] · B [N, K]ᵀ:
/// cuBLAS's first operand is our B, its second our A (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnMajor {
    /// op(first operand) is its transpose.
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub lda: i32,
    pub ldb: i32,
    pub ldc: i32,
}

/// [`ColumnMajor`] for our M, N, K: "TN", m = N, n = M, every leading dimension K except C's (N).
pub fn column_major(m: u32, n: u32, k: u32) -> Result<ColumnMajor, String> {
    let (mi, ni, ki) = dims(m, n, k)?;
    Ok(ColumnMajor { trans_a: true, trans_b: false, m: ni, n: mi, k: ki, lda: ki, ldb: ki, ldc: ni })
}

fn op(transposed: bool) -> blas::cublasOperation_t {
    if transposed { blas::cublasOperation_t::CUBLAS_OP_T } else { blas::cublasOperation_t::CUBLAS_OP_N }
}

/// A cuBLAS handle bound to the GPU's stream.
#[derive(Debug)]
pub struct Cublas {
    handle: blas::cublasHandle_t,
}

impl Cublas {
    pub fn new(gpu: &Gpu) -> Result<Cublas, String> {
        libraries().cublas.as_ref().map_err(Clone::clone)?;
        guarded(|| {
            gpu.ctx.bind_to_thread().map_err(|e| format!("binding the CUDA context: {e}"))?;
            let handle = blas_result::create_handle().map_err(|e| format!("cublasCreate failed: {e}"))?;
            let cublas = Cublas { handle };
            // SAFETY: a live handle and the context's own stream.
            unsafe { blas_result::set_stream(handle, gpu.stream.cu_stream() as blas::cudaStream_t) }
                .map_err(|e| format!("cublasSetStream failed: {e}"))?;
            Ok(cublas)
        })
    }

    /// The library's version (e.g. 130100 for 13.1.0).
    pub fn version(&self) -> Option<i32> {
        let mut v = 0;
        // SAFETY: a live handle; writes one int.
        let status =
            guarded(|| unsafe { blas::cublasGetVersion_v2(self.handle, &mut v) }.result().map_err(|e| e.to_string()));
        status.ok().map(|_| v)
    }

    /// Enqueues C = A·Bᵀ for row-major fp16 A [M, K], B [N, K] and C [M, N] (fp32
    /// accumulation, one rounding to fp16), batch after batch (L of them, contiguous).
    ///
    /// # Safety
    ///
    /// `a`, `b`, `c` must be device buffers of L·M·K, L·N·K and L·M·N fp16 values.
    pub unsafe fn gemm_f16(&self, dims: (u32, u32, u32, u32), a: u64, b: u64, c: u64) -> Result<(), String> {
        // SAFETY: forwarded from the caller.
        unsafe { self.gemm_16bit(dims, false, a, b, c) }
    }

    /// [`Cublas::gemm_f16`] with bf16 A, B and C when `bf16`.
    ///
    /// # Safety
    ///
    /// `a`, `b`, `c` must be device buffers of L·M·K, L·N·K and L·M·N 16-bit values.
    pub unsafe fn gemm_16bit(
        &self,
        (m, n, k, l): (u32, u32, u32, u32),
        bf16: bool,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<(), String> {
        let (dtype, name) = match bf16 {
            true => (blas::cudaDataType::CUDA_R_16BF, "bf16"),
            false => (blas::cudaDataType::CUDA_R_16F, "fp16"),
        };
        let cm = column_major(m, n, k)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        guarded(|| {
            for batch in 0..l as u64 {
                let a = a + batch * m as u64 * k as u64 * 2;
                let b = b + batch * n as u64 * k as u64 * 2;
                let c = c + batch * m as u64 * n as u64 * 2;
                // Column-major view (module docs): C^T [N x M] = op(B as K x N, T) · (A as K x M).
                // SAFETY: the caller vouches for the buffers; alpha and beta are host f32s
                // (the handle's default pointer mode) matching the f32 compute type.
                unsafe {
                    blas_result::gemm_ex(
                        self.handle,
                        op(cm.trans_a),
                        op(cm.trans_b),
                        cm.m,
                        cm.n,
                        cm.k,
                        &alpha as *const f32 as *const c_void,
                        b as *const c_void, // cuBLAS's first operand: our B
                        dtype,
                        cm.lda,
                        a as *const c_void,
                        dtype,
                        cm.ldb,
                        &beta as *const f32 as *const c_void,
                        c as *mut c_void,
                        dtype,
                        cm.ldc,
                        blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        blas::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
                    )
                }
                .map_err(|e| format!("cublasGemmEx ({name}, {m}x{n}x{k}) failed: {e}"))?;
            }
            Ok(())
        })
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle is live and dropped once; a failure here changes nothing.
        let _ = guarded(|| unsafe { blas_result::destroy_handle(self.handle) }.map_err(|e| e.to_string()));
    }
}

/// The output type an FP8 plan writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fp8Output {
    F16,
    Bf16,
}

/// One operand converted to e4m3 with a per-tensor scale: `value ≈ scale · e4m3(byte)`.
#[derive(Clone, Debug)]
pub struct Fp8Operand {
    pub bytes: Vec<u8>,
    /// A power of two: dividing by it is exact, and on the benchmark's inputs (every
    /// e2m1 · e4m3 product has at most 4 significant bits) so is the conversion.
    pub scale: f32,
}

/// Converts dequantized values to e4m3 with the power-of-two per-tensor scale that maps
/// the largest magnitude to at most 448 (e4m3's largest finite value).
pub fn to_fp8(values: &[f16]) -> Fp8Operand {
    let amax = values.par_iter().map(|v| v.to_f32().abs()).filter(|v| v.is_finite()).reduce(|| 0.0, f32::max);
    let scale = if amax > 0.0 { 2f32.powi((amax / e4m3::MAX).log2().ceil() as i32) } else { 1.0 };
    let bytes = values.par_iter().map(|v| e4m3::encode(v.to_f32() / scale)).collect();
    Fp8Operand { bytes, scale }
}

/// A cuBLASLt FP8 e4m3 GEMM planned for one shape: C [M, N] = (sa·A8)·(sb·B8)ᵀ, fp32
/// accumulation (cuBLASLt's default, not the "fast accumulation" mode), fp16 output (bf16
/// where this cuBLASLt offers no fp16-output FP8 algorithm).
#[derive(Debug)]
pub struct Fp8Gemm {
    handle: lt::cublasLtHandle_t,
    desc: lt::cublasLtMatmulDesc_t,
    /// cuBLAS's A (our B), cuBLAS's B (our A), C, D.
    layouts: [lt::cublasLtMatrixLayout_t; 4],
    algo: Option<lt::cublasLtMatmulAlgo_t>,
    workspace: CudaSlice<u8>,
    /// Our A's and our B's scales, on the device (cuBLASLt reads them by pointer), laid out
    /// by [`scale_buffer`].
    scales: CudaSlice<f32>,
    pub output: Fp8Output,
    shape: (u32, u32, u32, u32),
    stream: blas::cudaStream_t,
}

impl Fp8Gemm {
    /// Plans the GEMM for `shape` (M, N, K, L) with our A's scale `sa` and our B's `sb`.
    pub fn new(gpu: &Gpu, shape: (u32, u32, u32, u32), sa: f32, sb: f32) -> Result<Fp8Gemm, String> {
        libraries().cublaslt.as_ref().map_err(Clone::clone)?;
        let (m, n, k, _) = shape;
        dims(m, n, k)?;
        if !k.is_multiple_of(16) {
            return Err(format!("cuBLASLt FP8 needs K a multiple of 16, K = {k}"));
        }
        let s = &gpu.stream;
        let workspace =
            s.alloc_zeros::<u8>(LT_WORKSPACE_BYTES).map_err(|e| format!("allocating the cuBLASLt workspace: {e}"))?;
        let scales = s.clone_htod(&scale_buffer(sa, sb)).map_err(|e| format!("copying the FP8 scales: {e}"))?;
        guarded(|| {
            gpu.ctx.bind_to_thread().map_err(|e| format!("binding the CUDA context: {e}"))?;
            let handle = lt_result::create_handle().map_err(|e| format!("cublasLtCreate failed: {e}"))?;
            let mut plan = Fp8Gemm {
                handle,
                desc: std::ptr::null_mut(),
                layouts: [std::ptr::null_mut(); 4],
                algo: None,
                workspace,
                scales,
                output: Fp8Output::F16,
                shape,
                stream: s.cu_stream() as blas::cudaStream_t,
            };
            let mut last = String::new();
            for output in [Fp8Output::F16, Fp8Output::Bf16] {
                match plan.try_plan(output) {
                    Ok(()) => return Ok(plan),
                    Err(e) => last = e,
                }
            }
            Err(last)
        })
    }

    /// Builds the descriptors for one output type and asks the heuristic for an algorithm.
    fn try_plan(&mut self, output: Fp8Output) -> Result<(), String> {
        self.destroy_descriptors();
        let (m, n, k, _) = self.shape;
        let e = |what: &'static str| move |err: lt_result::CublasError| format!("{what} failed: {err}");
        let out_type = match output {
            Fp8Output::F16 => lt::cudaDataType::CUDA_R_16F,
            Fp8Output::Bf16 => lt::cudaDataType::CUDA_R_16BF,
        };
        self.desc =
            lt_result::create_matmul_desc(lt::cublasComputeType_t::CUBLAS_COMPUTE_32F, lt::cudaDataType::CUDA_R_32F)
                .map_err(e("cublasLtMatmulDescCreate"))?;
        let set = |attr: lt::cublasLtMatmulDescAttributes_t, value: *const c_void, size: usize| {
            // SAFETY: a live descriptor; `value` points at `size` readable bytes.
            unsafe { lt_result::set_matmul_desc_attribute(self.desc, attr, value, size) }
                .map_err(|err| format!("cublasLtMatmulDescSetAttribute({attr:?}) failed: {err}"))
        };
        // The same "TN" problem as the fp16 GEMM, which is what cuBLASLt's FP8 kernels need.
        let cm = column_major(m, n, k)?;
        let (op_t, op_n) = (op(cm.trans_a) as i32, op(cm.trans_b) as i32);
        set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
            &op_t as *const i32 as _,
            size_of::<i32>(),
        )?;
        set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
            &op_n as *const i32 as _,
            size_of::<i32>(),
        )?;
        // cuBLAS's A is our B: its scale is our B's (index SCALE_STRIDE); cuBLAS's B is our A.
        let base = self.scales.device_ptr(self.scales.stream()).0;
        let (scale_of_our_a, scale_of_our_b) = (base, base + (SCALE_STRIDE * size_of::<f32>()) as u64);
        if base % 256 != 0 {
            return Err(format!("the FP8 scale buffer is not 256-byte aligned ({base:#x})"));
        }
        set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
            &scale_of_our_b as *const u64 as _,
            size_of::<u64>(),
        )?;
        set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
            &scale_of_our_a as *const u64 as _,
            size_of::<u64>(),
        )?;
        let layout = |t, rows: i32, cols: i32, ld: i32| {
            lt_result::create_matrix_layout(t, rows as u64, cols as u64, ld as i64)
                .map_err(e("cublasLtMatrixLayoutCreate"))
        };
        // A layout describes the matrix as stored: op = T stores k x m, op = N stores m x k.
        let (a_rows, a_cols) = if cm.trans_a { (cm.k, cm.m) } else { (cm.m, cm.k) };
        let (b_rows, b_cols) = if cm.trans_b { (cm.n, cm.k) } else { (cm.k, cm.n) };
        self.layouts[0] = layout(lt::cudaDataType::CUDA_R_8F_E4M3, a_rows, a_cols, cm.lda)?;
        self.layouts[1] = layout(lt::cudaDataType::CUDA_R_8F_E4M3, b_rows, b_cols, cm.ldb)?;
        self.layouts[2] = layout(out_type, cm.m, cm.n, cm.ldc)?;
        self.layouts[3] = layout(out_type, cm.m, cm.n, cm.ldc)?;
        let pref = lt_result::create_matmul_pref().map_err(e("cublasLtMatmulPreferenceCreate"))?;
        let bytes = LT_WORKSPACE_BYTES as u64;
        // Batch b's operands start b strides into 256-byte-aligned buffers (see `run`).
        let l = self.shape.3;
        use lt::cublasLtMatmulPreferenceAttributes_t as Pref;
        let alignments = [
            (Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, batch_alignment(n as u64 * k as u64, l)),
            (Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, batch_alignment(m as u64 * k as u64, l)),
            (Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, batch_alignment(m as u64 * n as u64 * 2, l)),
            (Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, batch_alignment(m as u64 * n as u64 * 2, l)),
        ];
        // SAFETY: live descriptors throughout; the preference is destroyed once below.
        let heuristic = unsafe {
            let r = lt_result::set_matmul_pref_attribute(
                pref,
                Pref::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &bytes as *const u64 as _,
                size_of::<u64>(),
            )
            .and_then(|()| {
                alignments.iter().try_for_each(|(attr, bytes)| {
                    lt_result::set_matmul_pref_attribute(pref, *attr, bytes as *const u32 as _, size_of::<u32>())
                })
            })
            .map_err(e("cublasLtMatmulPreferenceSetAttribute"))
            .and_then(|()| {
                lt_result::get_matmul_algo_heuristic(
                    self.handle,
                    self.desc,
                    self.layouts[0],
                    self.layouts[1],
                    self.layouts[2],
                    self.layouts[3],
                    pref,
                )
                .map_err(|err| {
                    format!("cuBLASLt has no FP8 e4m3 algorithm with {output:?} output for this shape ({err})")
                })
            });
            let _ = lt_result::destroy_matmul_pref(pref);
            r?
        };
        self.algo = Some(heuristic.algo);
        self.output = output;
        Ok(())
    }

    fn destroy_descriptors(&mut self) {
        // SAFETY: each non-null descriptor is live and destroyed once (then nulled).
        unsafe {
            for layout in &mut self.layouts {
                if !layout.is_null() {
                    let _ = lt_result::destroy_matrix_layout(*layout);
                    *layout = std::ptr::null_mut();
                }
            }
            if !self.desc.is_null() {
                let _ = lt_result::destroy_matmul_desc(self.desc);
                self.desc = std::ptr::null_mut();
            }
        }
        self.algo = None;
    }

    /// Enqueues the GEMM on e4m3 A [L, M, K] (`a8`) and B [L, N, K] (`b8`) into C (`c`,
    /// L·M·N values of the plan's output type).
    ///
    /// # Safety
    ///
    /// The buffers must be device allocations of those sizes.
    pub unsafe fn run(&self, a8: u64, b8: u64, c: u64) -> Result<(), String> {
        let algo = self.algo.as_ref().ok_or("the FP8 GEMM has no plan")?;
        let (m, n, k, l) = self.shape;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ws = self.workspace.device_ptr(self.workspace.stream()).0;
        if let Some((what, p)) = [("A", a8), ("B", b8), ("C", c)].into_iter().find(|(_, p)| p % 256 != 0) {
            return Err(format!("cuBLASLt FP8: {what} at {p:#x} is not 256-byte aligned"));
        }
        guarded(|| {
            for batch in 0..l as u64 {
                let a = a8 + batch * m as u64 * k as u64;
                let b = b8 + batch * n as u64 * k as u64;
                let c = c + batch * m as u64 * n as u64 * 2;
                // SAFETY: live plan; the caller vouches for the buffers.
                unsafe {
                    lt_result::matmul(
                        self.handle,
                        self.desc,
                        &alpha as *const f32 as _,
                        &beta as *const f32 as _,
                        b as *const c_void,
                        self.layouts[0],
                        a as *const c_void,
                        self.layouts[1],
                        c as *const c_void,
                        self.layouts[2],
                        c as *mut c_void,
                        self.layouts[3],
                        algo,
                        ws as *mut c_void,
                        LT_WORKSPACE_BYTES,
                        self.stream as lt::cudaStream_t,
                    )
                }
                .map_err(|e| format!("cublasLtMatmul (FP8, {m}x{n}x{k}) failed: {e}"))?;
            }
            Ok(())
        })
    }
}

impl Drop for Fp8Gemm {
    fn drop(&mut self) {
        let _ = guarded(|| {
            self.destroy_descriptors();
            // SAFETY: the handle is live and destroyed once.
            unsafe { lt_result::destroy_handle(self.handle) }.map_err(|e| e.to_string())
        });
    }
}

/// ‖got − want‖₂ / ‖want‖₂ over the elements where `want` is finite, and the number of
/// elements where `got` is NaN or infinite while `want` is finite (each one a failure).
pub fn relative_error(got: &[f32], want: &[f16]) -> (f64, u64) {
    let (num, den, bad) = got
        .par_iter()
        .zip(want.par_iter())
        .filter(|(_, w)| w.is_finite())
        .map(|(&g, w)| {
            let w = w.to_f64();
            if g.is_finite() { ((g as f64 - w).powi(2), w * w, 0u64) } else { (0.0, w * w, 1) }
        })
        .reduce(|| (0.0, 0.0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    let rel = if den > 0.0 {
        (num / den).sqrt()
    } else if num > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    (rel, bad + got.len().abs_diff(want.len()) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_conversion_is_exact_on_the_benchmark_draw() {
        // Every e2m1 magnitude times every benchmark scale (0..3), both signs.
        let mut values = Vec::new();
        for code in 0..16u8 {
            for scale in 0..4 {
                values.push(crate::dequant::value(code, e4m3::encode(scale as f32)));
            }
        }
        let fp8 = to_fp8(&values);
        assert_eq!(fp8.scale, 2f32.powi(-4), "amax 18 maps to 288 <= 448 with a power-of-two scale");
        for (v, &b) in values.iter().zip(&fp8.bytes) {
            assert_eq!(e4m3::decode(b) * fp8.scale, v.to_f32(), "{v} is not exact in e4m3 after scaling");
        }
        assert_eq!(to_fp8(&[f16::ZERO; 4]).scale, 1.0);
        // Wide scales: 2048 needs a scale of 8 (2048 / 448 = 4.6); 2688 = 6 * 448 has 5
        // significant bits and rounds to 2560 in e4m3 (the FP8 baseline's own error).
        let big = to_fp8(&[f16::from_f32(2048.0), f16::from_f32(-1.0), f16::from_f32(2688.0)]);
        assert_eq!(big.scale, 8.0);
        assert_eq!(e4m3::decode(big.bytes[0]) * 8.0, 2048.0);
        assert_eq!(e4m3::decode(big.bytes[1]) * 8.0, -1.0);
        assert_eq!(e4m3::decode(big.bytes[2]) * 8.0, 2560.0);
    }

    /// BLAS's column-major GEMM, C = op(A) · op(B), written from its definition.
    fn blas_gemm(cm: &ColumnMajor, a: &[f64], b: &[f64]) -> Vec<f64> {
        let (m, n, k) = (cm.m as usize, cm.n as usize, cm.k as usize);
        let (lda, ldb, ldc) = (cm.lda as usize, cm.ldb as usize, cm.ldc as usize);
        let mut c = vec![0.0; ldc * n];
        for j in 0..n {
            for i in 0..m {
                let mut sum = 0.0;
                for p in 0..k {
                    let op_a = if cm.trans_a { a[p + i * lda] } else { a[i + p * lda] };
                    let op_b = if cm.trans_b { b[j + p * ldb] } else { b[p + j * ldb] };
                    sum += op_a * op_b;
                }
                c[i + j * ldc] = sum;
            }
        }
        c
    }

    #[test]
    fn the_column_major_arguments_compute_a_times_b_transposed_row_major() {
        // The classic benchmark bug is a transposed operand: check the arguments against
        // BLAS's definition on a small problem with M, N and K all different.
        let (m, n, k) = (3usize, 5usize, 4usize);
        let a: Vec<f64> = (0..m * k).map(|i| (i * 7 % 11) as f64 - 5.0).collect(); // row-major [M, K]
        let b: Vec<f64> = (0..n * k).map(|i| (i * 5 % 13) as f64 - 6.0).collect(); // row-major [N, K]
        let cm = column_major(m as u32, n as u32, k as u32).unwrap();
        assert!(cm.trans_a && !cm.trans_b, "cuBLASLt FP8 on Hopper needs TN");
        let c = blas_gemm(&cm, &b, &a); // cuBLAS's first operand is our B
        for r in 0..m {
            for col in 0..n {
                let want: f64 = (0..k).map(|p| a[r * k + p] * b[col * k + p]).sum();
                assert_eq!(c[r * n + col], want, "C[{r}][{col}] read row-major");
            }
        }
        assert!(column_major(1 << 31, 1, 64).is_err(), "M beyond cuBLAS's int is refused, not wrapped");
    }

    #[test]
    fn each_fp8_scale_sits_on_its_own_256_byte_boundary() {
        // cublasLtMatmul refused every algorithm with the second scale at +4 bytes.
        let v = scale_buffer(0.0625, 8.0);
        assert_eq!((SCALE_STRIDE * size_of::<f32>()) % 256, 0);
        assert_eq!(v.len(), 2 * SCALE_STRIDE);
        assert_eq!((v[0], v[SCALE_STRIDE]), (0.0625, 8.0));
        assert_eq!(v.iter().filter(|&&x| x != 0.0).count(), 2);
    }

    #[test]
    fn batch_alignment_is_what_every_batch_pointer_keeps() {
        assert_eq!(batch_alignment(12_345, 1), 256, "one batch: the allocation's own alignment");
        assert_eq!(batch_alignment(7168 * 16384, 3), 256);
        assert_eq!(batch_alignment(16 * 64, 2), 256);
        assert_eq!(batch_alignment(3 * 64, 2), 64, "M = 3, K = 64: A's batches 192 bytes apart");
        assert_eq!(batch_alignment(8 * 2, 2), 16, "C of M = 1, N = 8: 16 bytes apart");
        for (stride, l) in [(192u64, 2u32), (16, 4), (1 << 20, 2), (7 * 128, 5)] {
            let a = batch_alignment(stride, l) as u64;
            assert!((0..l as u64).all(|b| (b * stride) % a == 0) && a <= 256 && a.is_power_of_two());
        }
    }

    #[test]
    fn relative_error_is_the_norm_ratio() {
        let want = [f16::from_f32(3.0), f16::from_f32(4.0), f16::INFINITY];
        assert_eq!(relative_error(&[3.0, 4.0, 0.0], &want), (0.0, 0));
        let (rel, bad) = relative_error(&[3.0, 4.5, 7.0], &want);
        assert!((rel - 0.1).abs() < 1e-12 && bad == 0, "{rel}");
        assert_eq!(relative_error(&[f32::NAN, 4.0, 0.0], &want).1, 1);
    }

    #[test]
    fn missing_libraries_are_errors_not_panics() {
        // With or without cuBLAS on this machine, asking never panics, and a missing
        // library says what to install.
        let libs = libraries();
        for lib in [&libs.cublas, &libs.cublaslt] {
            if let Err(why) = lib {
                println!("{why}");
                assert!(why.contains("could not be loaded") && why.contains("nvidia-cublas"), "{why}");
            }
        }
    }

    #[test]
    #[cfg(unix)]
    fn a_library_off_the_loader_path_is_opened_by_full_path_then_found_by_soname() {
        // libcudart stands in for cuBLAS (the same wheels, the same nvidia/cu13/lib folder):
        // where it is installed but not on the loader path, `load` must make its soname
        // resolvable for cudarc; where it is nowhere, it must say so.
        // SAFETY: only opens (and closes) the library.
        let present = || unsafe { libloading::Library::new("libcudart.so.13") }.is_ok();
        let before = present();
        match load("cudart", present) {
            Ok(from) => {
                assert!(present(), "loaded from {from} but the soname does not resolve");
                println!("libcudart.so.13: on the loader path before: {before}; now from {from}");
            }
            Err(why) => assert!(!before && why.contains("libcudart could not be loaded"), "{why}"),
        }
    }

    #[test]
    fn guarded_turns_a_panic_into_an_error() {
        let r: Result<(), String> = guarded(|| panic!("Missing symbol cublasFoo"));
        assert!(r.unwrap_err().contains("Missing symbol cublasFoo"));
        assert_eq!(guarded(|| Ok::<_, String>(3)), Ok(3));
    }
}
