"""Times nvfp4_gemm.mm from Python on the benchmark shapes, as `host bench` times the
kernels: gpumode-style inputs, L2 flushed before each call, CUDA events around the call
alone, median of 50. The difference to `host bench` is what the Python call adds on the
GPU; what it costs on the CPU is measured by scripts/python-overhead.py."""

import torch

import nvfp4_gemm as g
from gpu_timing import l2_flush_buffer, median_us

SHAPES = [(128, 7168, 16384), (128, 4096, 7168), (128, 7168, 2048), (2304, 4608, 7168)]


def main():
    torch.manual_seed(1)
    flush = l2_flush_buffer()
    print(f"device {torch.cuda.get_device_name()}, kernel {g.kernel_for()}, torch {torch.__version__}")
    for m, n, k in SHAPES:
        a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device="cuda")
        b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
        a_sf = g.to_blocked(torch.randint(0, 4, (m, k // 16), device="cuda").to(torch.float8_e4m3fn))
        b_sf = g.to_blocked(torch.randint(0, 4, (n, k // 16), device="cuda").to(torch.float8_e4m3fn))
        alpha = torch.tensor([1.0], device="cuda")
        for variant, call in [
            ("mm, fp16 out", lambda: g.mm(a, b, a_sf, b_sf, out_dtype=torch.float16)),
            ("mm, bf16 out, alpha tensor", lambda: g.mm(a, b, a_sf, b_sf, alpha=alpha)),
        ]:
            idle, busy = median_us(call, flush, busy=False), median_us(call, flush, busy=True)
            print(f"{m}x{n}x{k:<6} {variant:<28} median {idle:8.2f} us idle GPU, {busy:8.2f} us behind GPU work")


def w4a16():
    """W4A16 (fp16 activations, NVFP4 weights) next to cuBLAS fp16 on pre-dequantized
    weights, with the GPU busy while Python enqueues; decode shapes included."""
    flush = l2_flush_buffer()
    shapes = SHAPES[:3] + [(mm, n, k) for mm in (1, 16) for (_, n, k) in SHAPES[:3]]
    for m, n, k in shapes:
        x = (torch.randint(-8, 9, (m, k), device="cuda") / 4).to(torch.float16)
        w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
        w_sf = g.to_blocked(torch.randint(0, 4, (n, k // 16), device="cuda").to(torch.float8_e4m3fn))
        w16 = g.dequantize(w, w_sf, torch.float16)
        assert torch.equal(g.w4a16_mm(x, w, w_sf), (x.float() @ w16.float().t()).half())
        ours = median_us(lambda: g.w4a16_mm(x, w, w_sf), flush, busy=True)
        cublas = median_us(lambda: torch.matmul(x, w16.t()), flush, busy=True)
        weight_bytes = n * k // 2 + n * k // 16
        print(f"w4a16 {m}x{n}x{k:<6} w4a16_mm {ours:8.2f} us ({weight_bytes / ours / 1e3:6.0f} GB/s of weights), "
              f"cuBLAS fp16 pre-dequantized {cublas:8.2f} us")


if __name__ == "__main__":
    main()
    w4a16()
