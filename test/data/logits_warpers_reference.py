"""Reference results of transformers' logits warpers on vocabulary-sized rows, for test/generation.test.ts.

Run: /tmp/reference-venv/bin/python test/data/logits_warpers_reference.py  (writes logits_warpers_reference.json beside it)

Each row has 151,936 float32 scores from a closed formula the test recomputes (float64 arithmetic rounded once
to float32, as Math.fround does). Each case applies transformers' TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper and MinPLogitsWarper in generate()'s order, and records how many tokens are kept, the least
kept score and the sum of the kept indices. transformers' top-p drops tokens by sorted position, so within a
tie at the boundary it may keep only some; the test keeps every token tied with the least kept score and so
compares against `kept_at_or_above_min` (tokens whose score is >= the least one transformers kept).
"""
import json
import math
import os

import numpy as np
import torch
import transformers
from transformers.generation.logits_process import MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

V = 151_936
i = np.arange(V, dtype=np.float64)
ROWS = {
    # every value repeated ~15 times, spread evenly over [-5, 5]: a flat distribution, top-p keeps thousands
    "flat": ((i * 7919) % 10007) / 1000 - 5,
    # one value per token (7919 is prime to 151936), -sqrt(rank): peaked like an LM's, top-p keeps a dozen
    "peaked": -np.sqrt((i * 7919) % V),
    # repeated values on a steep slope: ties at the top and at the boundary
    "ties": -(((i * 7919) % 10007) // 3) / 20,
}
CASES = [
    ("flat", {"top_k": 50}), ("flat", {"top_p": 0.9}), ("flat", {"temperature": 0.7, "top_k": 50, "top_p": 0.9}),
    ("flat", {"min_p": 0.05}), ("peaked", {"top_p": 0.9}), ("peaked", {"temperature": 0.7, "top_p": 0.95}),
    ("peaked", {"top_k": 20, "top_p": 0.95}), ("peaked", {"min_p": 0.1}), ("peaked", {"top_p": 0.0}),
    ("ties", {"top_k": 7}), ("ties", {"top_p": 0.5}), ("ties", {"top_p": 0.99}), ("ties", {"min_p": 0.2}),
]
out = {"reference": f"transformers {transformers.__version__}, torch {torch.__version__}", "vocab": V, "cases": []}
for row, kw in CASES:
    scores = torch.tensor(ROWS[row].astype(np.float32))[None, :]
    ids = torch.zeros((1, 1), dtype=torch.long)
    if "temperature" in kw:
        scores = TemperatureLogitsWarper(kw["temperature"])(ids, scores)
    warped = scores
    if "top_k" in kw:
        warped = TopKLogitsWarper(kw["top_k"])(ids, warped)
    if "top_p" in kw:
        warped = TopPLogitsWarper(kw["top_p"])(ids, warped)
    if "min_p" in kw:
        warped = MinPLogitsWarper(kw["min_p"])(ids, warped)
    kept = torch.isfinite(warped[0])
    least = float(warped[0][kept].min())
    at_or_above = (scores[0] >= least) & torch.isfinite(scores[0])
    out["cases"].append({
        "row": row, "warpers": kw, "kept": int(kept.sum()), "least_kept": least,
        "kept_at_or_above_min": int(at_or_above.sum()), "kept_index_sum": int(torch.nonzero(kept)[:, 0].sum()),
        "at_or_above_index_sum": int(torch.nonzero(at_or_above)[:, 0].sum()),
    })
json.dump(out, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "logits_warpers_reference.json"), "w"), indent=1)
print(json.dumps(out["cases"], indent=None)[:3000])
