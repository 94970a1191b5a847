"""PyTorch peer of bench/conv2d.ts: F.conv2d at the same shapes, float32, on `threads` threads.

Input (argv[1]): JSON {"threads": T, "shapes": [[N, C, H, W, O, k, stride, padding], ...]}.
Output: JSON list, one {"wall", "cpu"} per shape: milliseconds per call, the best wall time over
the windows and the least process CPU time (all threads) per call, as the bench measures them.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

spec = json.loads(sys.argv[1])
torch.set_num_threads(spec["threads"])


def best_ms(fn, windows=5, min_ms=150):
    fn()
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


out = []
with torch.inference_mode():
    for N, C, H, W, O, k, stride, padding in spec["shapes"]:
        x = torch.randn(N, C, H, W)
        w = torch.randn(O, C, k, k)
        b = torch.randn(O)
        out.append(best_ms(lambda: F.conv2d(x, w, b, stride=stride, padding=padding)))
print(json.dumps(out))
