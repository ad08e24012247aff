#!/usr/bin/env bash
# The closing checks on a GPU for the current binaries in .gpu/ (see build-for-device.sh):
# the ignored GPU tests, the README's PyTorch round trip, the main shape, selftest,
# emulator fidelity, bench and compute-sanitizer. Logs and JSON go to $OUT.
set -u
OUT=${OUT:-device-out}; mkdir -p "$OUT"
H=./.gpu/host
step() { echo; echo "=== $*"; }
step "GPU tests (cargo test --release -p host --test gpu -- --ignored)"
timeout 300 ./.gpu/gpu-tests --ignored --test-threads 1; echo "[exit $?]"
step "README: PyTorch writes inputs, host reads them and writes C, PyTorch reads C"
ROOT=$(pwd)
(cd "$OUT" && python3 "$ROOT/.gpu/snippet.py"); echo "[exit $?] snippet"
timeout 120 $H --inputs "$OUT/inputs.safetensors" --output "$OUT/c.safetensors" --iters 5; echo "[exit $?]"
python3 -c "from safetensors.torch import load_file; c = load_file('$OUT/c.safetensors')['c']; print('c', c.dtype, tuple(c.shape), 'all finite:', bool(c.isfinite().all()))"
rm -f "$OUT/inputs.safetensors" "$OUT/c.safetensors"
step "main shape"
timeout 120 $H --shape 128x7168x16384 --kernel naive; echo "[exit $?]"
timeout 120 $H --shape 128x7168x16384 --kernel sm90; echo "[exit $?]"
step "selftest"
timeout 300 $H selftest --json "$OUT/selftest.json"; echo "[exit $?]"
step "emulator fidelity"
timeout 300 $H selftest --compare-emulator --json "$OUT/compare-emulator.json"; echo "[exit $?]"
step "bench"
timeout 300 $H bench --json "$OUT/bench.json"; echo "[exit $?]"
step "compute-sanitizer, sm90"
for shape in 256x256x512 128x7168x2048; do
  for tool in memcheck racecheck synccheck; do
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $H --shape $shape --kernel sm90 --iters 0 2>&1 | grep -E "SUMMARY|verify"
    echo "[exit ${PIPESTATUS[0]}] $tool $shape"
  done
done
