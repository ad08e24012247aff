# Runs vLLM's own csrc/quantization/marlin/generate_kernels.py, restricted to the
# NVFP4 quant config (b=kFE2M1f, s=kFE4M3fn, group_blocks=1, a=c in {fp16,bf16}).
# vLLM's generator module is imported unmodified; only its QUANT_CONFIGS list and
# OUTPUT_DIR global are narrowed before calling generate_new_kernels().
import importlib.util, os, sys
src, out = sys.argv[1], sys.argv[2]
sys.argv = [src, "9.0", out]          # arch list as vLLM's CMake passes it
spec = importlib.util.spec_from_file_location("vllm_marlin_gen", src)
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)          # __main__ guard: nothing generated yet
nvfp4 = [c for c in gen.QUANT_CONFIGS
         if c["b_type"] == "kFE2M1f" and c.get("s_type") == "kFE4M3fn"]
assert len(nvfp4) == 1, nvfp4
gen.QUANT_CONFIGS[:] = nvfp4
gen.OUTPUT_DIR = out
os.makedirs(out, exist_ok=True)
gen.remove_old_kernels()
gen.generate_new_kernels()
