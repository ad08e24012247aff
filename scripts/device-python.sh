#!/usr/bin/env bash
# On the device machine, after scripts/build-python-for-device.sh here: installs the wheel
# and pytest from .gpu/wheels, runs the Python tests on CUDA tensors, the README example
# and the Python timing next to `host bench`.
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
python3 --version
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
python3 -m pip install --quiet --no-index --find-links .gpu/wheels --no-deps nvfp4_gemm pytest iniconfig pluggy packaging pygments 2>&1 | grep -v "root user"
echo "=== pytest (CUDA tests included)"
timeout 600 python3 -m pytest -q -rs python/tests 2>&1 | tail -25
echo "=== README example"
python3 python/examples/quickstart.py 2>&1 | grep -v Warning
echo "=== mm from Python (median of 50, L2 flushed, CUDA events)"
python3 scripts/python-timing.py
echo "=== CPU cost per call"
python3 scripts/python-overhead.py
echo "=== host bench, same kernel"
[ -x ./.gpu/host ] && ./.gpu/host bench --no-baselines --kernel sm90v2 | grep -E "^(128|2304)x"
