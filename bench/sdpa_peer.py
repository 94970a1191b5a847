"""PyTorch peer of bench/sdpa.ts: F.scaled_dot_product_attention at the same shapes, float32, on
`threads` threads.

Input (argv[1]): JSON {"threads": T, "windows": W, "shapes": [[B, Hq, Hkv, Lq, Lk, D, causal], ...]}.
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


def best_ms(fn, windows, min_ms=100):
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
    for B, Hq, Hkv, Lq, Lk, D, causal in spec["shapes"]:
        q = torch.randn(B, Hq, Lq, D)
        k = torch.randn(B, Hkv, Lk, D)
        v = torch.randn(B, Hkv, Lk, D)
        out.append(best_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=Hq != Hkv), spec["windows"]))
print(json.dumps(out))
