"""PyTorch side of bench/bf16_gemm.ts: F.linear with bfloat16 activations and weights at the given
shapes. usage: python bf16_gemm_peer.py THREADS '[[M, N, K], ...]'; prints a JSON list of
{"wall", "cpu"} ms per call (bench/peer_timing.py)."""
import json, os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import best_ms

torch.set_num_threads(int(sys.argv[1]))
out = []
with torch.inference_mode():
    for m, n, k in json.loads(sys.argv[2]):
        x = torch.randn(m, k).to(torch.bfloat16)
        w = torch.randn(n, k).to(torch.bfloat16)
        out.append(best_ms(lambda: torch.nn.functional.linear(x, w), 5, 100))
print(json.dumps(out))
