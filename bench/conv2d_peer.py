"""PyTorch peer of bench/conv2d.ts: F.conv2d at the same shapes, float32, on `threads` threads.

Input (argv[1]): JSON {"threads": T, "shapes": [[N, C, H, W, O, k, stride, padding], ...]}.
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
    for N, C, H, W, O, k, stride, padding in spec["shapes"]:
        x = torch.randn(N, C, H, W)
        w = torch.randn(O, C, k, k)
        b = torch.randn(O)
        out.append(best_ms(lambda: F.conv2d(x, w, b, stride=stride, padding=padding), 5, 150))
print(json.dumps(out))
