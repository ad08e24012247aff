"""Prints the per-CTA timeline of one sm90v2 call from the stamps that
scripts/timeline/timeline.patch makes the kernels write (docs/perf-notes.md, session 21).

    git apply scripts/timeline/timeline.patch && bash scripts/build-for-device.sh
    # on the GPU machine:
    NVFP4_TIMELINE=t.bin ./.gpu/host --shape 128x7168x2048 --kernel sm90v2 --iters 30 --verify none
    python3 scripts/timeline/timeline.py t.bin

Times are us from the first prologue CTA's start (one %globaltimer for every SM). The
patch costs ~1 us of event time on an H100 (~4 us of 128x7168x16384 on an H200, session
44) and spills in the medium GEMM entry (4 bytes stored, 48 loaded); revert it (git
checkout -- crates) before measuring anything else. Refreshed in session 38 for stream-K
units (one or two segments each), and in session 44 for today's producer."""

import statistics
import struct
import sys

PROLOGUE, GEMM, REDUCE = 0, 8192, 16384  # u64 slots, as in the patch
GEMM_EVENTS = ["CTA start", "producer past griddepcontrol.wait", "first stage ready (consumer 0)",
               "first segment done (consumer 0)", "unit done (consumer 0)", "unit done (consumer 255)",
               "producer done"]


def main(path):
    raw = open(path, "rb").read()
    v = struct.unpack(f"<{len(raw) // 8}Q", raw)
    prologue = [(v[PROLOGUE + 2 * i], v[PROLOGUE + 2 * i + 1]) for i in range(4096) if v[PROLOGUE + 2 * i]]
    gemm = [v[GEMM + 8 * i:GEMM + 8 * i + 8] for i in range(1024) if v[GEMM + 8 * i]]
    reduce = [(v[REDUCE + 2 * i], v[REDUCE + 2 * i + 1]) for i in range(4096) if v[REDUCE + 2 * i]]
    t0 = min(start for start, _ in prologue)

    def us(t):
        return (t - t0) / 1000

    def row(name, values):
        values = [us(x) for x in values]
        print(f"{name:40s} {min(values):7.2f} {statistics.median(values):7.2f} {max(values):7.2f}")

    print(f"{len(prologue)} prologue, {len(gemm)} GEMM, {len(reduce)} reduce CTAs; us: min median max")
    row("prologue CTA start", [s for s, _ in prologue])
    row("prologue CTA end", [e for _, e in prologue])
    for j, name in enumerate(GEMM_EVENTS):
        row("GEMM " + name, [g[j] for g in gemm])
    loop = [(g[4] - g[2]) / 1000 for g in gemm]
    print(f"{'GEMM first stage to unit done (duration)':40s} {min(loop):7.2f} {statistics.median(loop):7.2f} {max(loop):7.2f}")
    if reduce:
        row("reduce CTA past griddepcontrol.wait", [s for s, _ in reduce])
        # (A CTA whose thread 0 holds only padding rows returns before its end stamp.)
        row("reduce CTA end", [e for _, e in reduce if e])


if __name__ == "__main__":
    main(sys.argv[1])
