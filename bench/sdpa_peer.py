"""PyTorch peer of bench/sdpa.ts: F.scaled_dot_product_attention at the same shapes, float32, on
`threads` threads.

Input (argv[1]): JSON {"threads": T, "windows": W, "shapes": [[B, Hq, Hkv, Lq, Lk, D, causal], ...]}.
Output: JSON list, one {"wall", "cpu"} per shape: milliseconds per call, the best wall time over
the windows and the least process CPU time (all threads) per call, as the bench measures them.
"""
import json
import sys

import torch
import torch.nn.functional as F

from peer_timing import best_ms

spec = json.loads(sys.argv[1])
torch.set_num_threads(spec["threads"])


out = []
with torch.inference_mode():
    for B, Hq, Hkv, Lq, Lk, D, causal in spec["shapes"]:
        q = torch.randn(B, Hq, Lq, D)
        k = torch.randn(B, Hkv, Lk, D)
        v = torch.randn(B, Hkv, Lk, D)
        out.append(best_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=Hq != Hkv), spec["windows"], 100))
print(json.dumps(out))
