#!/usr/bin/env bash
# On the device machine, after scripts/build-for-device.sh (or any build copied to
# .gpu/host): the SM clock each GEMM kernel of `host bench` runs at, ours and cuBLAS's /
# cuBLASLt's side by side, from ncu (`--clock-control none`: the card's own clocks), with
# each launch's time and tensor-pipe activity; then nvidia-smi's view of a steady loop of
# ours. Usage: bash scripts/gemm-clocks.sh [SHAPES]   (default: the first two GPU MODE shapes)
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
H=./.gpu/host
SHAPES=${1:-128x7168x16384,128x4096x7168}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv
echo "=== ncu: per kernel, median [min..max] over its launches"
timeout 420 ncu --clock-control none --csv --metrics \
  gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
  $H bench --shape "$SHAPES" --kernel sm90v2 --mode nvfp4 --iters 3 > "$OUT/clocks-ncu.csv" 2> "$OUT/clocks-ncu.err"
echo "ncu exit $?"
python3 - "$OUT/clocks-ncu.csv" <<'PY'
import collections, csv, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
rows = list(csv.reader(lines[start:]))
head, rows = rows[0], rows[1:]
col = {name: head.index(name) for name in ("ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Value")}
launches = collections.OrderedDict()
for r in rows:
    launch = launches.setdefault(r[col["ID"]], {"kernel": r[col["Kernel Name"]][:60] + " " + r[col["Grid Size"]]})
    try:
        launch[r[col["Metric Name"]].split(".")[0]] = float(r[col["Metric Value"]].replace(",", ""))
    except ValueError:  # "n/a": a metric this GPU does not have
        pass
by_kernel = collections.OrderedDict()
for launch in launches.values():
    by_kernel.setdefault(launch["kernel"], []).append(launch)
def spread(values, scale, digits):
    return f"{statistics.median(values) * scale:.{digits}f} [{min(values) * scale:.{digits}f}..{max(values) * scale:.{digits}f}]"
print(f"{'kernel, grid':<76} {'n':>3}  {'us':<22} {'SM GHz':<20} tensor pipe % of active cycles")
for kernel, ls in by_kernel.items():
    us = [l["gpu__time_duration"] for l in ls]
    ghz = [l["sm__cycles_elapsed"] for l in ls]
    tensor = [l["sm__pipe_tensor_op_hmma_cycles_active"] for l in ls]
    print(f"{kernel:<76} {len(ls):>3}  {spread(us, 1e-3, 2):<22} {spread(ghz, 1e-9, 3):<20} {spread(tensor, 1, 1)}")
PY
echo "=== nvidia-smi every 50 ms over a steady loop of ours (128x7168x16384): samples by clock and throttle reasons"
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > "$OUT/clocks-smi.csv" &
SMI=$!
sleep 1
timeout 120 $H --shape 128x7168x16384 --kernel sm90v2 --iters 20000 --verify none | grep -E "^time"
sleep 1
kill $SMI
awk -F', ' '{print $1, $3}' "$OUT/clocks-smi.csv" | sort | uniq -c | sort -rn | head -5
awk -F', ' '{p = $2 + 0; if (p > 300) {n++; s += p}} END {if (n) printf "%d samples above 300 W, mean %.0f W\n", n, s / n}' "$OUT/clocks-smi.csv"
