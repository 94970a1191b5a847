"""Timing for the PyTorch peers of the kernel benchmarks, as bench/timing.ts does for tsorch:
ms per call, the best wall time over `windows` windows of at least `min_ms` each and the least
process CPU time per call, after one untimed warm-up call."""
import time


def best_ms(fn, windows, min_ms):
    fn()
    wall = cpu = float("inf")
    for _ in range(windows):
        t0, c0 = time.perf_counter(), time.process_time()
        n = 0
        while True:
            fn()
            n += 1
            t = (time.perf_counter() - t0) * 1e3
            if t >= min_ms:
                break
        wall = min(wall, t / n)
        cpu = min(cpu, (time.process_time() - c0) * 1e3 / n)
    return {"wall": wall, "cpu": cpu}
