#!/usr/bin/env bash
# Builds the Python package's wheel (abi3: any CPython >= 3.9) and downloads pytest's
# wheels into .gpu/wheels, for the device machine (no Rust, no internet there). There:
#   pip install --no-index --find-links .gpu/wheels --no-deps nvfp4_gemm pytest iniconfig pluggy packaging
#   python -m pytest python/tests      (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu/wheels && mkdir -p .gpu/wheels
python3 -m maturin build --release --manifest-path python/Cargo.toml --out .gpu/wheels
python3 -m pip download --quiet --disable-pip-version-check --only-binary :all: --dest .gpu/wheels pytest
ls .gpu/wheels
