#!/usr/bin/env bash
# Builds marlin-bench (vLLM's Marlin NVFP4 W4A16 GEMM + this harness) for sm_90a,
# cudart linked statically. See README.md.
#
# Nothing is written into the repository's tracked tree:
#   work dir  $MARLIN_WORK (default /tmp/marlin-baseline): vLLM sdist, private CUDA
#             toolchain, generated sources, objects
#   output    $DEST (default <repo>/.gpu/marlin, git-ignored): marlin-bench
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${MARLIN_WORK:-/tmp/marlin-baseline}
DEST=${DEST:-$REPO/.gpu/marlin}
VLLM_VER=0.33.0
VLLM_COMMIT=4ba787ec9   # __commit_id__ in the sdist's vllm/_version.py
VLLM_VERSION="$VLLM_VER (git $VLLM_COMMIT)"
VLLM=${VLLM:-$WORK/vllm-src/vllm-$VLLM_VER}
mkdir -p "$WORK"

# --- 1. vLLM sources: the 0.33.0 sdist from PyPI (downloaded, never committed).
# `pip download --no-deps --no-binary :all: vllm==0.33.0` fetches this file but then
# runs vLLM's setup.py to prepare metadata, which needs vLLM's build requirements
# (setuptools-rust, torch, ...) and fails or takes very long, so the file is fetched
# from the URL PyPI's simple index lists for it and checked against its sha256.
SDIST_URL=https://files.pythonhosted.org/packages/f7/25/aa5684e9c59d6fc75f78926b7f15e8d9adc7de2d9e6e7575b80776ad8169/vllm-$VLLM_VER.tar.gz
SDIST_SHA256=f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112
if [ ! -f "$VLLM/csrc/quantization/marlin/marlin.cu" ]; then
  tgz=$WORK/vllm-$VLLM_VER.tar.gz
  if [ ! -f "$tgz" ]; then
    curl -fL --retry 3 -o "$tgz.part" "$SDIST_URL"
    mv "$tgz.part" "$tgz"
  fi
  echo "$SDIST_SHA256  $tgz" | sha256sum -c -
  mkdir -p "$WORK/vllm-src"
  tar -xzf "$tgz" -C "$WORK/vllm-src"
  VLLM=$WORK/vllm-src/vllm-$VLLM_VER
fi
grep -q "$VLLM_COMMIT" "$VLLM/vllm/_version.py" || { echo "unexpected vLLM tree at $VLLM" >&2; exit 1; }

# --- 2. Private, version-consistent CUDA 13.0 toolchain (a mixed pip install of
# nvcc 13.0 with nvvm 13.5 makes ptxas reject the PTX), installed with pip --target.
CUDA=${CUDA:-$WORK/toolchain/nvidia/cu13}
if [ ! -x "$CUDA/bin/nvcc" ]; then
  pip install --quiet --no-deps --target "$WORK/toolchain" nvidia-cuda-nvcc==13.0.88 \
    nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 \
    nvidia-cuda-cccl==13.0.85
fi
export PATH=$CUDA/bin:$PATH

MARLIN=$VLLM/csrc/quantization/marlin
B=$WORK/build
rm -rf "$B/gen"
mkdir -p "$B/gen"

# --- 3. Sources generated from vLLM's files (see tools/*.py)
python3 "$HERE/tools/gen_kernels.py" "$MARLIN/generate_kernels.py" "$B/gen"
python3 "$HERE/tools/extract.py" "$MARLIN/marlin.cu" "$MARLIN/gptq_marlin_repack.cu" "$B/gen"

# --- 4. Compile. Flags follow vLLM's CMake build of these files: torch's common
# nvcc flags without the no-half defines, -DENABLE_FP8, -O3, and
# -static-global-template-stub=false (CUDA >= 12.8).
GENCODE="-gencode arch=compute_90a,code=sm_90a"
NVFLAGS="-O3 -std=c++17 $GENCODE -static-global-template-stub=false --expt-relaxed-constexpr -DENABLE_FP8 -Xcompiler -O3"
INC="-I$HERE/shim -I$VLLM/csrc -I$MARLIN -I$B/gen"

pids=()
for f in "$B"/gen/sm80_kernel_*.cu; do
  o="$B/$(basename "${f%.cu}").o"
  nvcc $NVFLAGS $INC -c "$f" -o "$o" &
  pids+=($!)
done
nvcc $NVFLAGS $INC -c "$B/gen/marlin_host.cu" -o "$B/marlin_host.o"
nvcc $NVFLAGS $INC "-DMARLIN_BENCH_VLLM_VERSION=\"$VLLM_VERSION\"" -c "$HERE/harness.cu" -o "$B/harness.o"
for p in "${pids[@]}"; do wait "$p"; done

nvcc $GENCODE -cudart static -L"$CUDA/lib" -o "$B/marlin-bench" "$B"/harness.o "$B"/marlin_host.o \
  "$B"/sm80_kernel_*.o -Xlinker -s -Xcompiler -static-libstdc++ -lpthread -ldl -lrt

mkdir -p "$DEST"
cp "$B/marlin-bench" "$DEST/marlin-bench"
echo "built $DEST/marlin-bench"

# --- 5. Sanity: only libc/libm/libgcc_s (+ loader) dynamic; report glibc symbol level
ldd "$DEST/marlin-bench" || true
bad=$(ldd "$DEST/marlin-bench" | grep "=>" | grep -v -E "lib(c|m|dl|pthread|rt|gcc_s|stdc\+\+)\.so" || true)
[ -z "$bad" ] || { echo "unexpected dynamic deps: $bad" >&2; exit 1; }
echo "max GLIBC symbol version: $(objdump -T "$DEST/marlin-bench" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
CUOBJDUMP=$(command -v cuobjdump || true)
if [ -n "$CUOBJDUMP" ]; then "$CUOBJDUMP" -lelf "$DEST/marlin-bench"; fi
