# Checks marlin-bench's host-side NVFP4 preparation (files written by
# `marlin-bench --dump-prep DIR --shapes MxNxK`) against vLLM's own Python.
#
# vLLM is not imported (it needs a GPU build); instead its functions are read from
# the downloaded sdist with `ast` and executed on the CPU with the local torch:
# prepare_fp4_layer_for_marlin itself, plus the helpers it calls. The only stubs
# are for the GPU repack op (it records its input, which is the GPTQ-layout
# weight that marlin-bench feeds to the same repack kernel on the GPU), for
# replace_parameter and for the logger.
#
# usage: check_prep_vs_vllm.py VLLM_SRC_DIR DUMP_DIR N K
import ast
import math
import sys
import types

import numpy as np
import torch

vllm_root, dump, N, K = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = {"torch": torch, "math": math}


class QuietLogger:
    def warning_once(self, *args, **kwargs):
        pass

    warning = info = debug = warning_once


def from_vllm(relpath, names):
    path = vllm_root + "/" + relpath
    tree = ast.parse(open(path).read())
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in found} == set(names), (relpath, names)
    exec(compile(ast.Module(found, []), path, "exec"), env)


repack_inputs = []


def fake_repack(b_q_weight, size_k, size_n, num_bits, is_a_8bit=False):
    assert (size_k, size_n, num_bits, is_a_8bit) == (K, N, 4, False)
    repack_inputs.append(b_q_weight.clone())
    return b_q_weight


def set_param(layer, name, value):
    setattr(layer, name, value)


env.update(logger=QuietLogger(), replace_parameter=set_param,
           ops=types.SimpleNamespace(gptq_marlin_repack=fake_repack))
from_vllm("vllm/utils/math_utils.py", {"round_up"})
UTILS = "vllm/model_executor/layers/quantization/utils/"
from_vllm(UTILS + "marlin_utils.py", {"get_scale_perms", "marlin_permute_scales", "marlin_padded_nk",
                                      "marlin_pad_qweight", "marlin_pad_scales"})
from_vllm(UTILS + "marlin_utils_fp4.py", {"prepare_fp4_layer_for_marlin", "_nvfp4_compute_scale_factor",
                                          "nvfp4_marlin_process_scales",
                                          "nvfp4_marlin_process_global_scale"})


def load(name, dtype, shape):
    return np.fromfile(dump + "/" + name, dtype=dtype).reshape(shape)


w_bytes = torch.from_numpy(load("w_packed.bin", np.uint8, (N, K // 2)))
s_bytes = torch.from_numpy(load("w_scale.bin", np.uint8, (N, K // 16)))
ok = True
for name, dt in (("fp16", torch.half), ("bf16", torch.bfloat16)):
    layer = types.SimpleNamespace(
        weight=w_bytes.clone(), weight_scale=s_bytes.clone().view(torch.float8_e4m3fn),
        weight_global_scale=torch.tensor(1.0, dtype=torch.float32),
        output_size_per_partition=N, input_size_per_partition=K, params_dtype=dt, bias=None)
    env["prepare_fp4_layer_for_marlin"](layer)
    if name == "fp16":
        mine_q = torch.from_numpy(load("qweight.bin", np.int32, (K // 8, N)))
        same_q = torch.equal(repack_inputs[-1], mine_q)
        print(f"weight before repack: shape {tuple(mine_q.shape)} identical={same_q}")
        ok &= same_q
    ref = layer.weight_scale.view(torch.uint8).numpy()
    mine = load(f"scales_{name}.bin", np.uint8, ref.shape)
    sf_mine, g_mine = np.fromfile(dump + f"/sf_gs_{name}.bin", dtype=np.float32)
    g_ref = float(layer.weight_global_scale)
    sf_ref = float(env["nvfp4_marlin_process_global_scale"](torch.tensor(1.0), dt)) / g_ref
    same = np.array_equal(ref, mine)
    print(f"{name}: scales {ref.shape} identical={same} (mismatches {(ref != mine).sum()}), "
          f"scale_factor vllm={sf_ref} mine={sf_mine}, global scale vllm={g_ref} mine={g_mine}")
    ok &= same and sf_ref == float(sf_mine) and g_ref == float(g_mine)
print("ALL MATCH" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
