#!/usr/bin/env bash
# Builds the release host binary (with its embedded PTX) and puts it in .gpu/, the folder
# carried to the device machine (it has no Rust toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p host
mkdir -p .gpu
cp target/release/host .gpu/
