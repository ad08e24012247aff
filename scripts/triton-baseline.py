"""What a PyTorch user on Hopper could write today instead of this library: NVFP4 GEMMs in
Triton, timed beside `nvfp4_gemm.mm` and `nvfp4_gemm.w4a16_mm` in the same process.

Two Triton kernels, each a plain tiled GEMM (one program per BLOCK_M x BLOCK_N tile and
K range, fp32 accumulator, `tl.dot` on fp16 operands):
- `dequant`: loads the packed e2m1 codes and the e4m3 scales of both operands (or takes
  fp16 activations for W4A16) and turns every value into fp16 value x scale x 2^-14 by
  placing the code's bits in an fp16 and one fp16 multiply (exact: see
  `_nvfp4_tile_f16`), so each product is exact and only the fp32 sums' order differs from
  ours; the accumulator is scaled back by 2^14 per NVFP4 operand;
- `dot_scaled`: Triton's own block-scaled dot (`tl.dot_scaled`, e2m1 operands with e4m3
  scales, one per 16 values), which Triton emulates on Hopper by the same upcast to bf16.
  Triton 3.6.0 does not compile it for sm_90 (an MLIR assertion); where a Triton cannot
  build it, the script prints the error and goes on without it.

Each kernel runs with a few tile shapes and split-K factors (split K sums fp32 partials
with atomics into a zeroed buffer, then rounds to fp16; both counted in its time); the
table shows the fastest per shape, with its configuration. Every configuration's output is
checked against ours (which is bit-exact against the CPU reference): the largest
difference must stay within fp32 summation order (rtol = atol = 1e-2 on fp16 outputs).

Timing as scripts/python-timing.py: L2 flushed before each call, CUDA events around the
call, median of 50, with the GPU kept busy while Python enqueues (Triton's launch costs
tens of us of CPU; a model's earlier layers would hide that), so the rows compare GPU
time. Run from the repository root with the wheel installed (scripts/device-python.sh).
"""

import os
import sys

import torch
import triton
import triton.language as tl

import nvfp4_gemm as g
from gpu_timing import ITERS, l2_flush_buffer, median_us

SHAPES = [(128, 7168, 16384), (128, 4096, 7168), (128, 7168, 2048), (2304, 4608, 7168)]
#: With TRITON_INTERPRET=1 (Triton's CPU interpreter, no GPU): small shapes, checks only.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRETED else "cuda"
CHECK_SHAPES = [(64, 128, 256), (100, 200, 512)]

#: (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages)
CONFIGS = [
    (128, 128, 64, 1, 8, 3),
    (128, 128, 128, 1, 8, 3),
    (128, 64, 128, 1, 4, 3),
    (64, 128, 128, 1, 4, 3),
    (128, 128, 128, 2, 8, 3),
    (128, 64, 128, 2, 4, 3),
    (128, 128, 128, 4, 8, 3),
    (128, 256, 64, 1, 8, 3),
]


@triton.jit
def _nvfp4_tile_f16(packed_ptr, sf_ptr, rows, row_mask, k0, K, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    """One [BLOCK_R, BLOCK_K] tile of an NVFP4 matrix ([R, K/2] bytes, element k in the low
    nibble when k is even; scales [R, K/16] e4m3) as exact fp16 values times 2^-14.

    An e2m1 code's bits placed as an fp16's (sign to bit 15, exponent and mantissa to bits
    11..9) are the fp16 of its value times 2^-14, the code 0.5 landing on a subnormal (the
    bit trick Marlin uses); times the fp16 scale that is value x scale x 2^-14, exact: a
    multiple of 2^-24 with at most 6 significant bits."""
    bytes_k = k0 // 2 + tl.arange(0, BLOCK_K // 2)
    packed = tl.load(packed_ptr + rows[:, None] * (K // 2) + bytes_k[None, :], mask=row_mask[:, None], other=0)
    packed = packed.to(tl.int16)
    low = ((packed & 0x8) << 12) | ((packed & 0x7) << 9)
    high = ((packed & 0x80) << 8) | ((packed & 0x70) << 5)
    codes = tl.reshape(tl.join(low, high), (BLOCK_R, BLOCK_K)).to(tl.float16, bitcast=True)
    groups = k0 // 16 + tl.arange(0, BLOCK_K // 16)
    sf_bytes = tl.load(sf_ptr + rows[:, None] * (K // 16) + groups[None, :], mask=row_mask[:, None], other=0)
    sf = sf_bytes.to(tl.float8e4nv, bitcast=True).to(tl.float16)
    sf = tl.reshape(tl.broadcast_to(sf[:, :, None], (BLOCK_R, BLOCK_K // 16, 16)), (BLOCK_R, BLOCK_K))
    return codes * sf


@triton.jit
def _program_tile(M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr):
    """This program's rows of A and of B (with masks for the edges) and its K range."""
    rows_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rows_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_per_split = K // SPLIT_K
    k_start = tl.program_id(2) * k_per_split
    return rows_m, rows_n, rows_m < M, rows_n < N, k_start, k_start + k_per_split


@triton.jit
def _dequant_gemm(a_ptr, a_sf_ptr, b_ptr, b_sf_ptr, c_ptr, M, N, K, A_IS_NVFP4: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    rows_m, rows_n, mask_m, mask_n, k_start, k_end = _program_tile(M, N, K, BLOCK_M, BLOCK_N, SPLIT_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        if A_IS_NVFP4:
            a = _nvfp4_tile_f16(a_ptr, a_sf_ptr, rows_m, mask_m, k0, K, BLOCK_M, BLOCK_K)
        else:
            ks = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rows_m[:, None] * K + ks[None, :], mask=mask_m[:, None], other=0.0)
        b = _nvfp4_tile_f16(b_ptr, b_sf_ptr, rows_n, mask_n, k0, K, BLOCK_N, BLOCK_K)
        acc = tl.dot(a, tl.trans(b), acc)
    # Each NVFP4 operand's values carry 2^-14 (see _nvfp4_tile_f16): undo it, exactly.
    acc = acc * (2.0**28 if A_IS_NVFP4 else 2.0**14)
    _store(c_ptr, acc, rows_m, rows_n, mask_m, mask_n, N, SPLIT_K)


@triton.jit
def _dot_scaled_gemm(a_ptr, a_sf_ptr, b_ptr, b_sf_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    rows_m, rows_n, mask_m, mask_n, k_start, k_end = _program_tile(M, N, K, BLOCK_M, BLOCK_N, SPLIT_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        bytes_k = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        groups = k0 // 16 + tl.arange(0, BLOCK_K // 16)
        a = tl.load(a_ptr + rows_m[:, None] * (K // 2) + bytes_k[None, :], mask=mask_m[:, None], other=0)
        # rhs is [K/2, N] (packed along K): B's rows read as columns.
        b = tl.load(b_ptr + rows_n[None, :] * (K // 2) + bytes_k[:, None], mask=mask_n[None, :], other=0)
        a_sf = tl.load(a_sf_ptr + rows_m[:, None] * (K // 16) + groups[None, :], mask=mask_m[:, None], other=0)
        b_sf = tl.load(b_sf_ptr + rows_n[:, None] * (K // 16) + groups[None, :], mask=mask_n[:, None], other=0)
        acc = tl.dot_scaled(a, a_sf.to(tl.float8e4nv, bitcast=True), "e2m1", b,
                            b_sf.to(tl.float8e4nv, bitcast=True), "e2m1", acc)
    _store(c_ptr, acc, rows_m, rows_n, mask_m, mask_n, N, SPLIT_K)


@triton.jit
def _store(c_ptr, acc, rows_m, rows_n, mask_m, mask_n, N, SPLIT_K: tl.constexpr):
    """fp16 C directly, or with split K fp32 partials added into a zeroed fp32 buffer."""
    offsets = rows_m[:, None] * N + rows_n[None, :]
    mask = mask_m[:, None] & mask_n[None, :]
    if SPLIT_K == 1:
        tl.store(c_ptr + offsets, acc.to(tl.float16), mask=mask)
    else:
        tl.atomic_add(c_ptr + offsets, acc, mask=mask, sem="relaxed")


def triton_call(kernel, config, a, a_sf, b, b_sf, m, n, k, **flags):
    """A callable running `kernel` on one configuration, fp16 C as its result."""
    block_m, block_n, block_k, split_k, warps, stages = config
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n), split_k)

    def call():
        if split_k == 1:
            c = torch.empty((m, n), dtype=torch.float16, device=DEVICE)
        else:
            c = torch.zeros((m, n), dtype=torch.float32, device=DEVICE)
        kernel[grid](a, a_sf, b, b_sf, c, m, n, k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                     SPLIT_K=split_k, num_warps=warps, num_stages=stages, **flags)
        return c if split_k == 1 else c.half()

    return call


def checked(name, call, expected):
    """Runs `call` once and compares with `expected` (ours, exact): the count of fp16 values
    that differ, None if C is wrong; raises Unsupported if the kernel does not build or run."""
    try:
        got = call()
        if not INTERPRETED:
            torch.cuda.synchronize()
    except Exception as error:  # compile errors of an unsupported form land here
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        print(f"    {name}: failed: {type(error).__name__}: {first_line}")
        raise Unsupported from error
    diff = (got.float() - expected.float()).abs()
    bound = 1e-2 + 1e-2 * expected.float().abs()
    bad = int((diff > bound).sum())
    if bad or not torch.isfinite(got).all():
        print(f"    {name}: WRONG: {bad} of {got.numel()} elements off, max abs diff {diff.max().item():.3e}")
        return None
    return int((got != expected).sum())


class Unsupported(Exception):
    """This Triton cannot build or run a kernel's form: its other configurations are skipped."""


def best_row(label, kernel, operands, m, n, k, expected, flush, **flags):
    """Times every configuration that computes the right C; prints and returns the best."""
    best, timed = None, 0
    for config in CONFIGS:
        block_m, block_n, block_k, split_k, _, _ = config
        if k % (block_k * split_k) or (m <= 64 < block_m):
            continue
        call = triton_call(kernel, config, *operands, m, n, k, **flags)
        try:
            differing = checked(f"{label} {config}", call, expected)
        except Unsupported:
            return None
        if differing is None:
            continue
        if INTERPRETED:
            print(f"{m}x{n}x{k:<6} {label:<26} {config}: right, {differing} fp16 values differ from ours")
            continue
        us = median_us(call, flush, busy=True)
        timed += 1
        if best is None or us < best[0]:
            best = (us, config, differing)
    if best is not None:
        us, config, differing = best
        tflops = 2 * m * n * k / us / 1e6
        print(f"{m}x{n}x{k:<6} {label:<26} {us:9.2f} us {tflops:6.1f} TFLOP/s  best of {timed} configs: "
              f"BLOCK {config[0]}x{config[1]}x{config[2]}, split K {config[3]}, {config[4]} warps, "
              f"{config[5]} stages; {differing} fp16 values differ from ours (sum order)")
    return best


def main():
    torch.manual_seed(1)
    if INTERPRETED:
        flush = None
        print(f"Triton {triton.__version__} interpreter on the CPU: checks only, ours = the exact CPU reference")
    else:
        flush = l2_flush_buffer()
        print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
              f"ours: {g.kernel_for()}; median of {ITERS}, L2 flushed, GPU busy while Python enqueues")
    for m, n, k in CHECK_SHAPES if INTERPRETED else SHAPES:
        a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device=DEVICE)
        b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=DEVICE)
        if INTERPRETED:  # every e4m3 scale up to 8, subnormals included: the exactness claim
            a_sf = torch.randint(0, 0x51, (m, k // 16), dtype=torch.uint8).view(torch.float8_e4m3fn)
            b_sf = torch.randint(0, 0x51, (n, k // 16), dtype=torch.uint8).view(torch.float8_e4m3fn)
        else:  # the benchmark's draw, as scripts/python-timing.py
            a_sf = torch.randint(0, 4, (m, k // 16), device=DEVICE).to(torch.float8_e4m3fn)
            b_sf = torch.randint(0, 4, (n, k // 16), device=DEVICE).to(torch.float8_e4m3fn)
        a_blocked, b_blocked = g.to_blocked(a_sf), g.to_blocked(b_sf)
        x = (torch.randint(-8, 9, (m, k), device=DEVICE) / 4).to(torch.float16)
        ours_nvfp4 = lambda: g.mm(a, b, a_blocked, b_blocked, out_dtype=torch.float16)  # noqa: E731
        ours_w4a16 = lambda: g.w4a16_mm(x, b, b_blocked)  # noqa: E731
        expected_nvfp4, expected_w4a16 = ours_nvfp4(), ours_w4a16()
        a_sf_bytes, b_sf_bytes = a_sf.view(torch.uint8), b_sf.view(torch.uint8)
        ours = [("nvfp4_gemm.mm", ours_nvfp4), ("nvfp4_gemm.w4a16_mm fp16", ours_w4a16)]
        for label, call in [] if INTERPRETED else ours:
            us = median_us(call, flush, busy=True)
            print(f"{m}x{n}x{k:<6} {label:<26} {us:9.2f} us {2 * m * n * k / us / 1e6:6.1f} TFLOP/s")
        best_row("triton dequant NVFP4", _dequant_gemm, (a, a_sf_bytes, b, b_sf_bytes), m, n, k, expected_nvfp4,
                 flush, A_IS_NVFP4=True)
        best_row("triton dot_scaled NVFP4", _dot_scaled_gemm, (a, a_sf_bytes, b, b_sf_bytes), m, n, k,
                 expected_nvfp4, flush)
        best_row("triton dequant W4A16 fp16", _dequant_gemm, (x, x, b, b_sf_bytes), m, n, k, expected_w4a16,
                 flush, A_IS_NVFP4=False)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
