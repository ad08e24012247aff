//! `nvfp4_gemm._native`: the GEMM's entry points for the Python package.
//!
//! The Python side (`nvfp4_gemm/__init__.py`) checks every tensor (dtype, shape, device,
//! contiguity) and passes raw addresses and sizes here, so this layer needs no torch
//! headers and no DLPack (which older PyTorch refuses for fp8 and fp4): CUDA tensors go to
//! [`host::api::Gemms::enqueue`] on PyTorch's current stream, in PyTorch's (primary)
//! context; CPU tensors to the exact reference, [`host::reference::reference_with`].
//! Errors become Python exceptions: arguments a kernel would misread are `ValueError`,
//! anything the GPU or driver reports is `RuntimeError`. Nothing here panics on bad input.

use host::api::{AFormat, Alpha, CUstream, Epilogue, Gemms, Operands};
use host::problem::{Epilogue as HostEpilogue, Problem};
use nvfp4::Shape;
use nvfp4::epilogue::OutDtype;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// A Rust error as the Python exception a caller can act on.
fn to_py(e: host::Error) -> PyErr {
    match e {
        host::Error::Invalid(_) | host::Error::Shape { .. } | host::Error::Usage(_) => {
            PyValueError::new_err(e.to_string())
        }
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// The shape `m x n x k x l`, or a ValueError saying why not.
fn shape(m: u32, n: u32, k: u32, l: u32) -> PyResult<Shape> {
    Shape::new(m, n, k, l).map_err(|e| PyValueError::new_err(format!("shape {m}x{n}x{k}x{l}: {e}")))
}

fn out_dtype(bf16: bool) -> OutDtype {
    if bf16 { OutDtype::Bf16 } else { OutDtype::F16 }
}

/// (kernel, GPU name, compute capability) of the kernel `mm` runs on CUDA device `device`.
#[pyfunction]
fn device_kernel(device: usize) -> PyResult<(String, String, (u32, u32))> {
    let gemms = Gemms::for_device(device).map_err(to_py)?;
    let info = gemms.device();
    Ok((gemms.kernel().to_string(), info.name.clone(), info.compute_capability))
}

/// (bytes, must start zeroed) of the scratch a call of shape m x n x k x l needs on
/// `device`.
#[pyfunction]
fn workspace(device: usize, m: u32, n: u32, k: u32, l: u32) -> PyResult<(u64, bool)> {
    let gemms = Gemms::for_device(device).map_err(to_py)?;
    Ok((gemms.workspace_bytes(shape(m, n, k, l)?), gemms.workspace_starts_zeroed()))
}

/// Enqueues C = alpha·A·Bᵀ (+ bias) on CUDA stream `stream` of device `device` and
/// returns at once. `alpha_ptr` (when not 0) is the address of one f32 in GPU memory and
/// overrides `alpha`; `bias` is 0 or the address of N values of C's type; `a_format` is A's
/// format code (`nvfp4::operand::AFormat`: 0 NVFP4, 1 fp16, 2 bf16 activations).
///
/// The Python caller guarantees every address is a live allocation of the device holding
/// the bytes the shape implies (that is what its checks are for).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn mm_cuda(
    device: usize,
    stream: usize,
    a: u64,
    b: u64,
    sfa: u64,
    sfb: u64,
    c: u64,
    m: u32,
    n: u32,
    k: u32,
    l: u32,
    alpha: f32,
    alpha_ptr: u64,
    bias: u64,
    out_bf16: bool,
    workspace: u64,
    a_format: u32,
) -> PyResult<()> {
    let shape = shape(m, n, k, l)?;
    let gemms = Gemms::for_device(device).map_err(to_py)?;
    let epilogue = Epilogue {
        alpha: if alpha_ptr != 0 { Alpha::Device(alpha_ptr) } else { Alpha::Scalar(alpha) },
        bias,
        out: out_dtype(out_bf16),
    };
    let a_format = AFormat::from_code(a_format)
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("unknown A format code {a_format}")))?;
    let ops = Operands { a, b, sfa, sfb, c, a_format };
    // SAFETY: the Python layer checked each tensor's device, dtype, size and contiguity;
    // the stream is PyTorch's current stream of that device.
    unsafe { gemms.enqueue(stream as CUstream, &ops, shape, &epilogue, workspace) }.map_err(to_py)
}

/// C = alpha·A·Bᵀ (+ bias) on the CPU by the exact reference, written to `c` ([L][M][N]
/// bits of fp16 or bf16). Addresses are of CPU tensors the Python caller checked; `bias`
/// is 0 or the address of N values of C's type. Releases the GIL while it computes.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn mm_cpu(
    py: Python<'_>,
    a: usize,
    b: usize,
    sfa: usize,
    sfb: usize,
    c: usize,
    m: u32,
    n: u32,
    k: u32,
    l: u32,
    alpha: f32,
    bias: usize,
    out_bf16: bool,
) -> PyResult<()> {
    let shape = shape(m, n, k, l)?;
    if !alpha.is_finite() {
        return Err(PyValueError::new_err(format!("alpha must be finite, got {alpha}")));
    }
    // SAFETY: the Python layer checked that each tensor is contiguous, on the CPU and
    // exactly as large as the shape implies; the slices live for this call only.
    let (problem, bias) = unsafe {
        let bytes = |addr: usize, len: u64| std::slice::from_raw_parts(addr as *const u8, len as usize).to_vec();
        let problem = Problem {
            shape,
            a: bytes(a, shape.a_bytes()),
            a_format: AFormat::Nvfp4,
            b: bytes(b, shape.b_bytes()),
            sfa: bytes(sfa, shape.sfa_bytes()),
            sfb: bytes(sfb, shape.sfb_bytes()),
            epilogue: HostEpilogue::IDENTITY,
        };
        let bias = (bias != 0).then(|| std::slice::from_raw_parts(bias as *const u16, n as usize).to_vec());
        (problem, bias)
    };
    let epilogue = HostEpilogue { alpha, alpha_in_memory: false, bias, out: out_dtype(out_bf16) };
    let bits = py.detach(|| host::reference::reference_with(&problem, &epilogue));
    // SAFETY: `c` is a contiguous CPU tensor of L·M·N 16-bit elements (checked in Python).
    unsafe { std::ptr::copy_nonoverlapping(bits.as_ptr(), c as *mut u16, bits.len()) };
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(workspace, m)?)?;
    m.add_function(wrap_pyfunction!(mm_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(mm_cpu, m)?)?;
    Ok(())
}
