"""CPU time per call of nvfp4_gemm.mm and of its parts (no synchronization inside the loop:
the GPU queue absorbs the kernels), next to a plain torch launch, to show what the
Python call costs on top of the kernel launches."""

import time

import torch

import nvfp4_gemm as g


def per_call_us(f, n=300):
    for _ in range(20):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    cpu = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return cpu


def main():
    m, n, k = 128, 4096, 7168
    a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device="cuda")
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    a_sf = g.to_blocked(torch.randint(0, 4, (m, k // 16), device="cuda").to(torch.float8_e4m3fn))
    b_sf = g.to_blocked(torch.randint(0, 4, (n, k // 16), device="cuda").to(torch.float8_e4m3fn))
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    ws_bytes, _ = g._native.workspace(0, m, n, k, 1)
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device="cuda")
    x = torch.zeros(16, device="cuda")
    rows = [
        ("torch.add (one launch)", lambda: torch.add(x, 1)),
        ("native enqueue (3 launches)", lambda: g._native.mm_cuda(0, 0, a.data_ptr(), b.data_ptr(), a_sf.data_ptr(),
                                                                   b_sf.data_ptr(), out.data_ptr(), m, n, k, 1, 1.0, 0, 0,
                                                                   True, ws.data_ptr(), 0)),
        # The Python side of mm, part by part.
        ("  its checks (_check_mm)", lambda: g._check_mm(a, b, a_sf, b_sf, None, None, torch.bfloat16, None)),
        ("  its output (torch.empty)", lambda: torch.empty(m, n, dtype=torch.bfloat16, device=a.device)),
        ("  its workspace", lambda: g._workspace(a.device, m, n, k, 1)),
        ("  its stream and 5 data_ptr()", lambda: (g._current_raw_stream(a.device), a.data_ptr(), b.data_ptr(),
                                                   a_sf.data_ptr(), b_sf.data_ptr(), out.data_ptr())),
        ("nvfp4_gemm.mm", lambda: g.mm(a, b, a_sf, b_sf)),
        ("nvfp4_gemm.mm(out=)", lambda: g.mm(a, b, a_sf, b_sf, out=out)),
        ("torch.ops.nvfp4_gemm.mm", lambda: torch.ops.nvfp4_gemm.mm(a, b, a_sf, b_sf, None, 1.0, None, torch.bfloat16)),
    ]
    for name, f in rows:
        print(f"{name:<30} {per_call_us(f):7.1f} us of CPU per call")


if __name__ == "__main__":
    main()
