#!/usr/bin/env bash
# Builds the release host binary (with its embedded PTX) and the ignored GPU tests, and
# puts them in .gpu/, the folder carried to the device machine (it has no Rust toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p host
mkdir -p .gpu
cp target/release/host .gpu/
tests=$(cargo test --release -p host --test gpu --no-run --message-format json 2>/dev/null |
  python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gpu" and m.get("executable"):
        print(m["executable"])')
cp "$tests" .gpu/gpu-tests
strip .gpu/host .gpu/gpu-tests
# The Hopper PTX as embedded (with the launch bounds the build script writes in), for
# the SASS check on the device (ptxas + cuobjdump there).
cp "$(ls -t target/release/build/host-*/out/sm90a.ptx | head -1)" .gpu/sm90a.ptx
