"""NVFP4 block-scaled GEMM on torch tensors: ``C = alpha * (A @ B.T) + bias`` in bf16 or fp16.

A and B hold 4-bit e2m1 values, two per byte (the low nibble is the even k), with one
float8_e4m3fn scale per 16 values along K in the "blocked" layout that cuBLAS, vLLM and
FlashInfer use: a 2-D tensor ``[round_up(rows, 128), round_up(K // 16, 4)]``, zero-padded,
whose bytes are 512-byte tiles of 128 rows x 4 scales (``to_blocked`` makes one from plain
``[rows, K // 16]`` scales). ``alpha`` is the product of the two operands' decode-direction
global scales.

CUDA tensors run the Rust kernels (the best one for the GPU: sm90v2 on Hopper, sm100 on
B200, naive elsewhere) on ``torch.cuda.current_stream()``, in PyTorch's own CUDA context:
nothing is copied, nothing but the output (and, for some shapes, kernel scratch from
PyTorch's caching allocator) is allocated, and the call does not synchronize. CPU tensors
run the exact CPU reference. ``mm`` and ``w4a16_mm`` are registered as torch custom ops
(``torch.ops.nvfp4_gemm.*``) with fake implementations, so ``torch.compile`` and CUDA
graphs work.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch

from . import _native

__all__ = ["mm", "w4a16_mm", "quantize", "to_blocked", "from_blocked", "dequantize", "kernel_for"]

#: Values per scale factor along K.
SF_VECTOR = 16
#: Rows and scale columns of one blocked tile.
TILE_ROWS, TILE_COLS = 128, 4
#: The e2m1 values by 4-bit code (the sign is bit 3).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
#: Largest e4m3 and e2m1 magnitudes.
E4M3_MAX, E2M1_MAX = 448.0, 6.0

_OUT_DTYPES = (torch.bfloat16, torch.float16)
_FP4_DTYPES = tuple(d for d in (torch.uint8, getattr(torch, "float4_e2m1fn_x2", None)) if d is not None)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _blocked_shape(rows: int, k: int) -> Tuple[int, int]:
    return _round_up(rows, TILE_ROWS), _round_up(k // SF_VECTOR, TILE_COLS)


# --------------------------------------------------------------------------------------
# Argument checks: every rejected input is a ValueError or TypeError that says what was
# expected (the native layer trusts what passes here).
# --------------------------------------------------------------------------------------


def _check_tensor(name: str, t, dtypes: Sequence[torch.dtype], device: Optional[torch.device] = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{name} must have dtype {want}, got {t.dtype}")
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device} but the operands are on {device}")
    if device is not None and t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} is on {t.device}: only CPU and CUDA tensors are supported")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (row-major); got strides {tuple(t.stride())} for shape {tuple(t.shape)}")


def _operand_dims(name: str, t: torch.Tensor) -> Tuple[int, int, int]:
    """(L, rows, last) of a 2-D or 3-D operand."""
    if t.dim() == 2:
        return 1, t.shape[0], t.shape[1]
    if t.dim() == 3:
        return t.shape[0], t.shape[1], t.shape[2]
    raise ValueError(f"{name} must be 2-D [rows, cols] or 3-D [L, rows, cols], got shape {tuple(t.shape)}")


def _check_scales(name: str, sf: torch.Tensor, batches: int, rows: int, k: int, device: torch.device) -> None:
    _check_tensor(name, sf, (torch.float8_e4m3fn,), device)
    r, c = _blocked_shape(rows, k)
    accepted = {(r, c), (batches * r * c,)} if batches == 1 else {(batches, r, c), (batches * r * c,)}
    if tuple(sf.shape) not in accepted:
        forms = " or ".join(str(list(s)) for s in sorted(accepted, key=len, reverse=True))
        raise ValueError(
            f"{name} must hold the blocked scales of {rows} rows x K/16 = {k // SF_VECTOR} (shape {forms}, "
            f"zero-padded; to_blocked() makes them from plain [rows, K/16] scales), got shape {tuple(sf.shape)}"
        )


def _alpha_parts(alpha, device: torch.device) -> Tuple[float, Optional[torch.Tensor]]:
    """(alpha by value, alpha as a one-element float32 tensor on the device or None)."""
    if alpha is None:
        return 1.0, None
    if isinstance(alpha, torch.Tensor):
        if alpha.dtype != torch.float32 or alpha.numel() != 1:
            raise ValueError(f"alpha must be a Python float or a one-element float32 tensor, got {alpha.dtype} of shape {tuple(alpha.shape)}")
        if alpha.device != device:
            raise ValueError(f"alpha is on {alpha.device} but the operands are on {device}")
        return 1.0, alpha
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
        value = float(alpha)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"alpha must be finite, got {value}")
        return value, None
    raise TypeError(f"alpha must be None, a float or a one-element float32 tensor, got {type(alpha).__name__}")


def _check_mm(a, b, a_sf, b_sf, alpha, bias, out_dtype, out) -> Tuple[Tuple[int, int, int, int], float, Optional[torch.Tensor]]:
    """Checks mm's arguments; returns ((L, M, N, K), alpha by value, alpha as a tensor or None)."""
    device = a.device if isinstance(a, torch.Tensor) else None  # a's own check says if it is not
    _check_tensor("a", a, _FP4_DTYPES, device)
    _check_tensor("b", b, _FP4_DTYPES, device)
    la, m, half_k = _operand_dims("a", a)
    lb, n, half_kb = _operand_dims("b", b)
    if a.dim() != b.dim() or la != lb:
        raise ValueError(f"a and b must have the same batch dimension, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if half_k != half_kb:
        raise ValueError(f"a and b must have the same K: a has K/2 = {half_k} bytes per row, b {half_kb}")
    k = 2 * half_k
    if k == 0 or k % SF_VECTOR != 0:
        raise ValueError(f"K = {k} must be a positive multiple of {SF_VECTOR} (one e4m3 scale per {SF_VECTOR} values)")
    _check_scales("a_sf", a_sf, la, m, k, device)
    _check_scales("b_sf", b_sf, la, n, k, device)
    if out_dtype not in _OUT_DTYPES:
        raise TypeError(f"out_dtype must be torch.bfloat16 or torch.float16, got {out_dtype}")
    alpha_value, alpha_tensor = _alpha_parts(alpha, device)
    if bias is not None:
        _check_tensor("bias", bias, (out_dtype,), device)
        if tuple(bias.shape) != (n,):
            raise ValueError(f"bias must have shape [N] = [{n}], got {tuple(bias.shape)}")
    if out is not None:
        _check_tensor("out", out, (out_dtype,), device)
        want = (m, n) if a.dim() == 2 else (la, m, n)
        if tuple(out.shape) != want:
            raise ValueError(f"out must have shape {list(want)}, got {tuple(out.shape)}")
    return (la, m, n, k), alpha_value, alpha_tensor


# --------------------------------------------------------------------------------------
# The blocked scale layout
# --------------------------------------------------------------------------------------


def to_blocked(sf: torch.Tensor) -> torch.Tensor:
    """Plain ``[rows, K/16]`` (or ``[L, rows, K/16]``) e4m3 scales to the blocked layout:
    ``[round_up(rows, 128), round_up(K/16, 4)]`` (per batch), zero-padded, whose bytes are
    128-row x 4-column tiles of 512 bytes (row r of a tile at byte (r % 32) * 16 + (r // 32) * 4)."""
    _check_tensor("sf", sf, (torch.float8_e4m3fn, torch.uint8))
    if sf.dim() == 3:
        return torch.stack([to_blocked(s) for s in sf])
    if sf.dim() != 2:
        raise ValueError(f"sf must be 2-D [rows, K/16] or 3-D [L, rows, K/16], got shape {tuple(sf.shape)}")
    rows, cols = sf.shape
    rb, cb = _round_up(rows, TILE_ROWS) // TILE_ROWS, _round_up(cols, TILE_COLS) // TILE_COLS
    bits = sf.view(torch.uint8)
    padded = torch.zeros((rb * TILE_ROWS, cb * TILE_COLS), dtype=torch.uint8, device=sf.device)
    padded[:rows, :cols] = bits
    tiles = padded.view(rb, 4, 32, cb, TILE_COLS).permute(0, 3, 2, 1, 4)  # [rb, cb, r%32, r//32, c]
    return tiles.reshape(rb * TILE_ROWS, cb * TILE_COLS).contiguous().view(sf.dtype)


def from_blocked(blocked: torch.Tensor, rows: int, k: int) -> torch.Tensor:
    """The inverse of ``to_blocked`` for one batch: ``[rows, K/16]`` (drops the padding)."""
    r, c = _blocked_shape(rows, k)
    tiles = blocked.reshape(r // TILE_ROWS, c // TILE_COLS, 32, 4, TILE_COLS).view(torch.uint8)
    plain = tiles.permute(0, 3, 2, 1, 4).reshape(r, c)
    return plain[:rows, : k // SF_VECTOR].contiguous().view(blocked.dtype)


def dequantize(packed: torch.Tensor, blocked_sf: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """NVFP4 ``[rows, K/2]`` with blocked scales to ``[rows, K]`` values e2m1 * e4m3 (exact in
    float32, float64, bfloat16 and float16)."""
    rows, k = packed.shape[-2], 2 * packed.shape[-1]
    if packed.dim() == 3:
        sfs = blocked_sf.reshape(packed.shape[0], -1)
        return torch.stack([dequantize(p, s, dtype) for p, s in zip(packed, sfs)])
    codes = packed.view(torch.uint8)
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
    values = torch.stack([lut[(codes & 0xF).long()], lut[(codes >> 4).long()]], dim=-1).reshape(rows, k)
    scales = from_blocked(blocked_sf, rows, k).float().repeat_interleave(SF_VECTOR, dim=1)
    return (values * scales).to(dtype)


# --------------------------------------------------------------------------------------
# Quantization
# --------------------------------------------------------------------------------------

# Rounding |v| to the nearest e2m1 magnitude, ties to even: the midpoints between
# neighbours, and whether a tie goes up (to the even neighbour above) or down.
_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_TIE_UP = (False, True, False, True, False, True, False)


def quantize(x: torch.Tensor, global_scale) -> Tuple[torch.Tensor, torch.Tensor]:
    """bf16/fp16 ``[rows, K]`` to NVFP4: (``uint8 [rows, K/2]``, blocked float8_e4m3fn scales)
    with ``x ~ e2m1 * scale / global_scale``.

    Per 16 values (in float32): ``scale = e4m3(min(amax / 6 * global_scale, 448))`` rounded to
    nearest even; each value becomes ``x * (global_scale / scale)`` rounded to the nearest
    e2m1 (ties to even, saturating at +-6); a zero scale gives zero values. That is the
    ModelOpt / TensorRT-LLM recipe. The same torch operations run on CPU and CUDA tensors,
    so both give the same bits."""
    _check_tensor("x", x, _OUT_DTYPES)
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [rows, K], got shape {tuple(x.shape)}")
    rows, k = x.shape
    if k == 0 or k % SF_VECTOR != 0:
        raise ValueError(f"K = {k} must be a positive multiple of {SF_VECTOR}")
    gs = torch.as_tensor(global_scale, dtype=torch.float32, device=x.device).reshape(())
    blocks = x.float().reshape(rows, k // SF_VECTOR, SF_VECTOR)
    amax = blocks.abs().amax(dim=-1)
    sf = (amax / E2M1_MAX * gs).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    decoded = sf.float()
    factor = torch.where(decoded > 0, gs / decoded, torch.zeros_like(decoded))
    v = blocks * factor.unsqueeze(-1)
    mag = v.abs()
    code = torch.zeros_like(mag, dtype=torch.uint8)
    for midpoint, up in zip(_MIDPOINTS, _TIE_UP):
        code += (mag >= midpoint if up else mag > midpoint).to(torch.uint8)
    code |= (v < 0).to(torch.uint8) << 3
    code = code.reshape(rows, k)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).contiguous()
    return packed, to_blocked(sf)


# --------------------------------------------------------------------------------------
# The GEMMs
# --------------------------------------------------------------------------------------


def kernel_for(device: Union[int, torch.device, None] = None) -> str:
    """The kernel ``mm`` runs on a CUDA device: ``sm90v2``, ``sm100`` or ``naive``."""
    if device is None:
        index = torch.cuda.current_device()
    elif isinstance(device, int):
        index = device
    else:
        index = device.index if device.index is not None else torch.cuda.current_device()
    return _native.device_kernel(index)[0]


# (device, m, n, k, l) -> (workspace bytes, must start zeroed): one native call per shape.
_WORKSPACE = {}


def _workspace(device: torch.device, m: int, n: int, k: int, l: int) -> Optional[torch.Tensor]:
    """The kernel scratch of a call, or None: from PyTorch's caching allocator, in stream
    order (no cudaMalloc per call, safe under CUDA graph capture and on any stream); its
    size is asked of the native layer once per shape."""
    key = (device.index, m, n, k, l)
    if key not in _WORKSPACE:
        _WORKSPACE[key] = _native.workspace(device.index, m, n, k, l)
    ws_bytes, zeroed = _WORKSPACE[key]
    if not ws_bytes:
        return None
    return (torch.zeros if zeroed else torch.empty)(ws_bytes, dtype=torch.uint8, device=device)


def _current_raw_stream(device: torch.device) -> int:
    """The CUstream of PyTorch's current stream on `device` (0 for the legacy default)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def _run_mm(a, b, a_sf, b_sf, alpha, alpha_value, bias, out, dims) -> None:
    """Launches (CUDA) or computes (CPU) a checked call; `dims` = (L, M, N, K)."""
    la, m, n, k = dims
    bf16 = out.dtype == torch.bfloat16
    if m == 0 or n == 0:
        return
    if a.device.type == "cpu":
        value = float(alpha.item()) if alpha is not None else alpha_value
        _native.mm_cpu(a.data_ptr(), b.data_ptr(), a_sf.data_ptr(), b_sf.data_ptr(), out.data_ptr(), m, n, k, la, value,
                       bias.data_ptr() if bias is not None else 0, bf16)
        return
    ws = _workspace(a.device, m, n, k, la)
    _native.mm_cuda(a.device.index, _current_raw_stream(a.device), a.data_ptr(), b.data_ptr(), a_sf.data_ptr(), b_sf.data_ptr(), out.data_ptr(),
                    m, n, k, la, alpha_value, alpha.data_ptr() if alpha is not None else 0,
                    bias.data_ptr() if bias is not None else 0, bf16, ws.data_ptr() if ws is not None else 0,
                    _A_NVFP4)


def _out_shape(a: torch.Tensor, b: torch.Tensor) -> Tuple[int, ...]:
    return (a.shape[0], a.shape[1], b.shape[1]) if a.dim() == 3 else (a.shape[0], b.shape[0])


@torch.library.custom_op("nvfp4_gemm::mm", mutates_args=())
def _mm_op(a: torch.Tensor, b: torch.Tensor, a_sf: torch.Tensor, b_sf: torch.Tensor, alpha: Optional[torch.Tensor],
           alpha_value: float, bias: Optional[torch.Tensor], out_dtype: torch.dtype) -> torch.Tensor:
    dims, _, _ = _check_mm(a, b, a_sf, b_sf, alpha if alpha is not None else alpha_value, bias, out_dtype, None)
    out = torch.empty(_out_shape(a, b), dtype=out_dtype, device=a.device)
    _run_mm(a, b, a_sf, b_sf, alpha, alpha_value, bias, out, dims)
    return out


@_mm_op.register_fake
def _(a, b, a_sf, b_sf, alpha, alpha_value, bias, out_dtype):
    return a.new_empty(_out_shape(a, b), dtype=out_dtype)


@torch.library.custom_op("nvfp4_gemm::mm_out", mutates_args=("out",))
def _mm_out_op(a: torch.Tensor, b: torch.Tensor, a_sf: torch.Tensor, b_sf: torch.Tensor, alpha: Optional[torch.Tensor],
               alpha_value: float, bias: Optional[torch.Tensor], out: torch.Tensor) -> None:
    dims, _, _ = _check_mm(a, b, a_sf, b_sf, alpha if alpha is not None else alpha_value, bias, out.dtype, out)
    _run_mm(a, b, a_sf, b_sf, alpha, alpha_value, bias, out, dims)


@_mm_out_op.register_fake
def _(a, b, a_sf, b_sf, alpha, alpha_value, bias, out):
    return None


def mm(a: torch.Tensor, b: torch.Tensor, a_sf: torch.Tensor, b_sf: torch.Tensor, alpha=None,
       out_dtype: torch.dtype = torch.bfloat16, out: Optional[torch.Tensor] = None,
       bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``C = alpha * (A @ B.T) + bias``, rounded once to ``out_dtype`` (bf16 or fp16).

    ``a`` [M, K/2] and ``b`` [N, K/2] (optionally [L, ...]) are uint8 or float4_e2m1fn_x2
    (two e2m1 values per byte, low nibble the even k); ``a_sf``/``b_sf`` float8_e4m3fn
    blocked scales (``to_blocked``), 2-D or flattened; ``alpha`` None, a float or a
    one-element float32 tensor on the same device (read when the kernel runs: CUDA graphs
    replay with its current value); ``bias`` [N] in ``out_dtype``; ``out`` an optional
    output tensor. Computed in fp32: ``acc * alpha`` or ``fma(acc, alpha, bias)``, then one
    rounding."""
    if out is not None and isinstance(out, torch.Tensor):
        out_dtype = out.dtype
    dims, alpha_value, alpha_tensor = _check_mm(a, b, a_sf, b_sf, alpha, bias, out_dtype, out)
    if torch.compiler.is_compiling():
        # Traced: the custom ops, whose fake implementations give the output's shape.
        if out is None:
            return torch.ops.nvfp4_gemm.mm(a, b, a_sf, b_sf, alpha_tensor, alpha_value, bias, out_dtype)
        torch.ops.nvfp4_gemm.mm_out(a, b, a_sf, b_sf, alpha_tensor, alpha_value, bias, out)
        return out
    # Eager: the same implementation without the dispatcher's ~16 us per call.
    if out is None:
        out = torch.empty(_out_shape(a, b), dtype=out_dtype, device=a.device)
    _run_mm(a, b, a_sf, b_sf, alpha_tensor, alpha_value, bias, out, dims)
    return out


def _check_w4a16(x, w, w_sf, alpha, bias, out) -> Tuple[float, Optional[torch.Tensor]]:
    """Checks w4a16_mm's arguments; returns (alpha by value, alpha as a tensor or None)."""
    device = x.device if isinstance(x, torch.Tensor) else None  # x's own check says if it is not
    _check_tensor("x", x, _OUT_DTYPES, device)
    _check_tensor("w", w, _FP4_DTYPES, device)
    lx, m, k = _operand_dims("x", x)
    if w.dim() != 2:
        raise ValueError(f"w must be 2-D [N, K/2] (the checkpoint's packed weight), got shape {tuple(w.shape)}")
    n, half_k = w.shape
    if 2 * half_k != k:
        raise ValueError(f"x has K = {k} but w holds K = {2 * half_k} values per row")
    if k == 0 or k % SF_VECTOR != 0:
        raise ValueError(f"K = {k} must be a positive multiple of {SF_VECTOR}")
    _check_scales("w_sf", w_sf, 1, n, k, device)
    alpha_parts = _alpha_parts(alpha, device)
    if bias is not None:
        _check_tensor("bias", bias, (x.dtype,), device)
        if tuple(bias.shape) != (n,):
            raise ValueError(f"bias must have shape [N] = [{n}], got {tuple(bias.shape)}")
    if out is not None:
        _check_tensor("out", out, (x.dtype,), device)
        want = (m, n) if x.dim() == 2 else (lx, m, n)
        if tuple(out.shape) != want:
            raise ValueError(f"out must have shape {list(want)}, got {tuple(out.shape)}")
    return alpha_parts


# A's format codes (`nvfp4::operand::AFormat`): NVFP4, and 16-bit activations by dtype.
_A_NVFP4 = 0
_A_FORMAT_CODES = {torch.float16: 1, torch.bfloat16: 2}

# Devices whose kernel takes 16-bit activations (the fused W4A16 path), by index.
_FUSED_W4A16 = {}


def _fused_w4a16(x: torch.Tensor) -> bool:
    if not x.is_cuda or x.dtype not in _A_FORMAT_CODES:
        return False
    index = x.device.index
    if index not in _FUSED_W4A16:
        _FUSED_W4A16[index] = _native.device_kernel(index)[0] == "sm90v2"
    return _FUSED_W4A16[index]


def _w4a16_fused(x, w, w_sf, alpha, alpha_value, bias, out) -> None:
    """sm90v2 with fp16 or bf16 activations: the prologue lays x out as the GEMM's 16-bit
    operand, the weights are dequantized in registers as in NVFP4 mode (and converted to
    bf16, exactly, for bf16 x)."""
    # One weight for every batch of x: the batches are rows of one GEMM, [L*M, K] x [N, K]^T.
    k, n = x.shape[-1], w.shape[0]
    m = x.numel() // k
    ws = _workspace(x.device, m, n, k, 1)
    _native.mm_cuda(x.device.index, _current_raw_stream(x.device), x.data_ptr(), w.data_ptr(), 0, w_sf.data_ptr(),
                    out.data_ptr(), m, n, k, 1, alpha_value, alpha.data_ptr() if alpha is not None else 0,
                    bias.data_ptr() if bias is not None else 0, out.dtype == torch.bfloat16,
                    ws.data_ptr() if ws is not None else 0, _A_FORMAT_CODES[x.dtype])


def _w4a16_into(x, w, w_sf, alpha, alpha_value, bias, out) -> None:
    # Weights dequantized exactly (e2m1 * e4m3 has at most 6 significant bits), products
    # with 16-bit activations exact in fp32, fp32 sums; the epilogue as the kernels do it
    # (a product of two f32 plus a 16-bit bias is exact in float64, so one rounding to f32
    # is the fma's), then one rounding to x's dtype.
    n, k = w.shape[0], x.shape[-1]
    rows = x.reshape(-1, k)
    acc = None
    if x.is_cuda:
        # Tensor cores on 16-bit operands with an fp32 result (torch >= 2.9 on CUDA):
        # every product is exact in fp32, as in the fused kernels.
        try:
            acc = torch.mm(rows, dequantize(w, w_sf, x.dtype).t(), out_dtype=torch.float32)
        except (TypeError, RuntimeError, NotImplementedError):
            acc = None
    if acc is None:
        acc = torch.mm(rows.float(), dequantize(w, w_sf, torch.float32).t())
    acc = acc.reshape(*x.shape[:-1], n)
    scale = alpha.reshape(()) if alpha is not None else torch.tensor(alpha_value, dtype=torch.float32, device=x.device)
    if bias is None:
        v = acc * scale
    else:
        v = (acc.double() * scale.double() + bias.double()).float()
    out.copy_(v.to(out.dtype))


@torch.library.custom_op("nvfp4_gemm::w4a16_mm", mutates_args=())
def _w4a16_op(x: torch.Tensor, w: torch.Tensor, w_sf: torch.Tensor, alpha: Optional[torch.Tensor], alpha_value: float,
              bias: Optional[torch.Tensor]) -> torch.Tensor:
    _check_w4a16(x, w, w_sf, alpha if alpha is not None else alpha_value, bias, None)
    out = torch.empty((*x.shape[:-1], w.shape[0]), dtype=x.dtype, device=x.device)
    _run_w4a16(x, w, w_sf, alpha, alpha_value, bias, out)
    return out


def _run_w4a16(x, w, w_sf, alpha, alpha_value, bias, out) -> None:
    """Computes a checked call into `out`: the fused kernel where there is one."""
    if x.numel() > 0 and _fused_w4a16(x):
        _w4a16_fused(x, w, w_sf, alpha, alpha_value, bias, out)
    else:
        _w4a16_into(x, w, w_sf, alpha, alpha_value, bias, out)


@_w4a16_op.register_fake
def _(x, w, w_sf, alpha, alpha_value, bias):
    return x.new_empty((*x.shape[:-1], w.shape[0]))


def w4a16_mm(x: torch.Tensor, w: torch.Tensor, w_sf: torch.Tensor, alpha=None, bias: Optional[torch.Tensor] = None,
             out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``y = alpha * (x @ W.T) + bias`` with bf16/fp16 activations ``x`` [M, K] (or [L, M, K])
    and an NVFP4 checkpoint's weight as stored: ``w`` [N, K/2] packed e2m1, ``w_sf`` its
    blocked float8_e4m3fn scales. The output has x's dtype.

    On Hopper this is sm90v2's W4A16 mode: the weights are dequantized into the tensor
    cores' registers (as fp16, or bf16 for bf16 x: exact either way), the activations laid
    out once per call. Otherwise (other GPUs, CPU) the weights are dequantized exactly and
    multiplied with an fp32 result. The epilogue is the kernels' fp32 rule either way."""
    alpha_value, alpha_tensor = _check_w4a16(x, w, w_sf, alpha, bias, out)
    if torch.compiler.is_compiling():
        # Traced: the custom op, whose fake implementation gives the output's shape.
        y = torch.ops.nvfp4_gemm.w4a16_mm(x, w, w_sf, alpha_tensor, alpha_value, bias)
        if out is None:
            return y
        out.copy_(y)
        return out
    # Eager: as in `mm`, the implementation without the dispatcher, straight into `out`.
    if out is None:
        out = torch.empty((*x.shape[:-1], w.shape[0]), dtype=x.dtype, device=x.device)
    _run_w4a16(x, w, w_sf, alpha_tensor, alpha_value, bias, out)
    return out
