#!/usr/bin/env bash
# Everything the project checks on a GPU, in one pass (the device machine forgets
# everything, so one call should do it all). Run from the repository root after
# `scripts/build-for-device.sh` here; logs go to $OUT (or ./device-out).
#
#   scripts/device-check.sh [quick|bench|full]
#
# quick: correctness (runs, selftest, emulator fidelity, probes, GPU tests, a few
# sanitizer runs, SASS, bad input); bench: the benchmark tables and the long sanitizer
# runs; full: both (more than one 10-minute device call: run quick and bench apart).
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
HOST=./.gpu/host
mode=${1:-full}
step() { echo; echo "=== $*"; }
run() { # run with a time limit, keep going on failure, echo the exit code
  local limit=$1; shift
  timeout "$limit" "$@"; local rc=$?
  echo "[exit $rc] $*"
}

step "device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.max.mem,power.limit --format=csv
run 60 $HOST info

if [ "$mode" != bench ]; then

step "main shape, naive, sm90 and sm90v2, verified against the exact CPU reference"
run 300 $HOST --shape 128x7168x16384 --kernel naive --json "$OUT/naive-main.json"
run 300 $HOST --shape 128x7168x16384 --kernel sm90 --json "$OUT/sm90-main.json"
run 300 $HOST --shape 128x7168x16384 --kernel sm90v2 --json "$OUT/sm90v2-main.json"
run 300 $HOST --shape 128x7168x16384 --kernel sm90 --dist wide --iters 5

step "epilogue (alpha, bias, bf16 out) and K that is not a multiple of 64"
for kernel in naive sm90 sm90v2; do
  run 300 $HOST --shape 128x7168x16384 --kernel $kernel --alpha 0.375 --bias --out-dtype bf16 --iters 20
  run 300 $HOST --shape 128x4096x7168 --kernel $kernel --alpha -2.5 --alpha-in-memory --iters 5
  for shape in 65x77x96x2 33x130x80x2 129x72x16 128x7168x2064; do
    run 120 $HOST --shape $shape --kernel $kernel --iters 3
  done
done
for shape in 33x130x80x2 128x4096x7184; do
  run 300 compute-sanitizer --tool memcheck --error-exitcode 9 $HOST --shape $shape --kernel sm90v2 --iters 0
  run 300 compute-sanitizer --tool memcheck --error-exitcode 9 $HOST --shape $shape --kernel sm90 --iters 0
done

step "ignored GPU tests (cargo test --release -p host --test gpu -- --ignored)"
[ -x ./.gpu/gpu-tests ] && run 600 ./.gpu/gpu-tests --ignored --test-threads 1

step "selftest (GPU)"
run 600 $HOST selftest --json "$OUT/selftest.json"

step "emulator fidelity: GPU vs emulator"
run 600 $HOST selftest --compare-emulator --json "$OUT/compare-emulator.json"

step "instruction probes: GPU vs emulator vs expected"
run 300 $HOST selftest --probes --json "$OUT/probes.json"

step "W4A16 (fp16 activations) on sm90v2, and its refusal elsewhere"
run 300 $HOST --shape 128x7168x16384 --kernel sm90v2 --mode w4a16 --iters 20
run 120 $HOST --shape 33x130x80x2 --kernel sm90v2 --mode w4a16 --alpha 0.375 --bias --out-dtype bf16 --iters 3
run 60 $HOST --shape 128x256x512 --kernel sm90 --mode w4a16
run 300 compute-sanitizer --tool memcheck --error-exitcode 9 $HOST --shape 129x300x1024 --kernel sm90v2 --mode w4a16 --iters 0

step "medium tiles (17 <= M <= 64) on sm90v2, NVFP4 and W4A16"
run 120 $HOST --shape 64x7168x16384 --kernel sm90v2 --iters 20
run 120 $HOST --shape 40x4096x7168 --kernel sm90v2 --mode w4a16 --alpha 0.375 --bias --out-dtype bf16 --iters 5
run 120 $HOST --shape 17x7168x2048x2 --kernel sm90v2 --mode w4a16-bf16 --iters 5

step "wide tiles (M > 128, 256 activation rows) on sm90v2, NVFP4 and W4A16"
run 120 $HOST --shape 2304x4608x7168 --kernel sm90v2 --iters 20
run 120 $HOST --shape 512x4096x7168 --kernel sm90v2 --mode w4a16 --alpha 0.375 --bias --out-dtype bf16 --iters 5
run 120 $HOST --shape 200x7168x2048x2 --kernel sm90v2 --mode w4a16-bf16 --iters 5

step "split tiles with rows past M (only the quads of rows inside M are stored and summed)"
for shape in 5x260x4096 33x520x4096 1x7168x2048; do
  run 120 $HOST --shape $shape --kernel sm90v2 --iters 3
  run 300 compute-sanitizer --tool memcheck --error-exitcode 9 $HOST --shape $shape --kernel sm90v2 --iters 0
done
run 300 compute-sanitizer --tool racecheck --error-exitcode 9 $HOST --shape 5x260x4096 --kernel sm90v2 --iters 0

step "W4A16 with bf16 activations on sm90v2"
run 300 $HOST --shape 128x7168x16384 --kernel sm90v2 --mode w4a16-bf16 --iters 20
run 120 $HOST --shape 33x130x80x2 --kernel sm90v2 --mode w4a16-bf16 --alpha 0.375 --bias --out-dtype bf16 --iters 3
run 120 $HOST --shape 5x260x4096 --kernel sm90v2 --mode w4a16-bf16 --iters 3
for tool in memcheck racecheck synccheck; do
  run 300 compute-sanitizer --tool $tool --error-exitcode 9 $HOST --shape 129x300x1024 --kernel sm90v2 --mode w4a16-bf16 --iters 0
done
fi

if [ "$mode" != quick ]; then
  step "bench"
  run 600 $HOST bench --json "$OUT/bench.json" --svg "$OUT/bench.svg"

  step "bench, decode shapes (M = 1 and 16: the weight read is the floor)"
  run 600 $HOST bench --decode --shape 128x7168x2048 --json "$OUT/bench-decode.json"

  step "compute-sanitizer on sm90 (small and large)"
  for tool in memcheck racecheck synccheck; do
    run 300 compute-sanitizer --tool $tool --error-exitcode 9 $HOST --shape 256x256x512 --kernel sm90 --iters 0
  done
  run 600 compute-sanitizer --tool memcheck --error-exitcode 9 $HOST --shape 128x7168x2048 --kernel sm90 --iters 0 --verify cpu
  run 600 compute-sanitizer --tool racecheck --error-exitcode 9 $HOST --shape 128x7168x2048 --kernel sm90 --iters 0 --verify none
  run 600 compute-sanitizer --tool synccheck --error-exitcode 9 $HOST --shape 128x7168x2048 --kernel sm90 --iters 0 --verify none
  for tool in memcheck racecheck synccheck; do
    run 300 compute-sanitizer --tool $tool --error-exitcode 9 $HOST selftest --probes
  done

  step "compute-sanitizer on sm90v2 (wide tiles with tails, a split-K shape, wide, medium and decode tiles split 8-16 ways)"
  for shape in 129x300x1024 128x4096x7168 200x130x4096 33x520x4096 5x260x4096; do
    for tool in memcheck racecheck synccheck; do
      run 300 compute-sanitizer --tool $tool --error-exitcode 9 $HOST --shape $shape --kernel sm90v2 --iters 0
    done
  done
fi

if [ "$mode" != bench ]; then
step "SASS of the Hopper kernels: HGMMA in the main loops, no local memory"
if [ -f ./.gpu/sm90a.ptx ]; then
  run 120 ptxas -arch=sm_90a -v -o "$OUT/sm90a.cubin" ./.gpu/sm90a.ptx 2> "$OUT/ptxas-sm90a.txt"
  grep -E "C75|spill" "$OUT/ptxas-sm90a.txt" | sort | uniq -c
  for fun in nvfp4_gemm_sm90 nvfp4_gemm_sm90v2 nvfp4_gemm_sm90v2_wide nvfp4_gemm_sm90v2_medium nvfp4_gemm_sm90v2_decode; do
    cuobjdump -sass -fun $fun "$OUT/sm90a.cubin" > "$OUT/$fun.sass"
    echo "$fun: $(grep -c HGMMA "$OUT/$fun.sass") HGMMA, $(grep -cE 'LDL|STL' "$OUT/$fun.sass") local loads/stores"
  done
fi

step "bad input: each must print one clear error and exit non-zero"
for args in "--shape 0x128x64" "--shape 128x128" "--shape 128x128x100" "--shape 128xx128" \
            "--shape 200000x200000x65536" "--inputs /nonexistent.safetensors" "--kernel sm90 --verify gpu --shape 128x128x64 --iters 0" \
            "--kernel sm100 --shape 128x7168x16384" ; do
  run 60 $HOST $args
done
fi
