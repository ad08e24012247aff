"""The README's example: quantize two bf16 matrices to NVFP4, multiply them, compare with
torch.matmul of the dequantized values (and of the original bf16 values)."""

import torch

import nvfp4_gemm

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
x = torch.randn(128, 4096, dtype=torch.bfloat16, device=device)  # activations [M, K]
w = torch.randn(7168, 4096, dtype=torch.bfloat16, device=device)  # weights [N, K]

# Per-tensor global scales map each tensor's amax onto the largest e2m1 * e4m3 value.
x_gs = 448 * 6 / x.abs().max().float()
w_gs = 448 * 6 / w.abs().max().float()
x_fp4, x_sf = nvfp4_gemm.quantize(x, x_gs)  # uint8 [M, K/2], float8_e4m3fn blocked scales
w_fp4, w_sf = nvfp4_gemm.quantize(w, w_gs)

alpha = 1 / (x_gs * w_gs)  # the product of the two decode-direction global scales
y = nvfp4_gemm.mm(x_fp4, w_fp4, x_sf, w_sf, alpha=alpha.reshape(1), out_dtype=torch.bfloat16)

exact = (nvfp4_gemm.dequantize(x_fp4, x_sf) @ nvfp4_gemm.dequantize(w_fp4, w_sf).T) * alpha
print(f"{device}: y {tuple(y.shape)} {y.dtype}, kernel {nvfp4_gemm.kernel_for() if device == 'cuda' else 'CPU reference'}")
print(f"max |y - dequantized matmul| / max |y| = {float((y.float() - exact).abs().max() / exact.abs().max()):.2e}")
ref = x.float() @ w.float().T
print(f"relative error vs the bf16 inputs' matmul (quantization): {float((y.float() - ref).norm() / ref.norm()):.3f}")
