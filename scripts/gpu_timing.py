"""GPU timing shared by the Python scripts (python-timing.py, triton-baseline.py), as
`host bench` times the kernels: L2 flushed before each call, CUDA events around the call
alone, median of ITERS calls."""

import statistics

import torch

ITERS = 50
#: ~100 us at the H100's clock: longer than the Python call's CPU time.
SLEEP_CYCLES = 200_000


def median_us(call, flush, busy):
    """Median GPU time of `call` in us over ITERS calls, L2 flushed before each (after
    three warm-up calls). With `busy`, the GPU sleeps while Python enqueues the call (as a
    model's earlier layers would keep it busy): the events then time the call's GPU work;
    without, they also time any wait for the CPU."""
    for _ in range(3):
        call()
    times = []
    for _ in range(ITERS):
        flush.zero_()
        if busy:
            torch.cuda._sleep(SLEEP_CYCLES)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        stop.record()
        times.append((start, stop))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in times)


def l2_flush_buffer():
    return torch.empty(2 * 50 * 2**20, dtype=torch.uint8, device="cuda")  # twice the H100's L2
