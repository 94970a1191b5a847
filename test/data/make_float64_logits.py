"""Float64 logits from Hugging Face transformers for tiny fixtures whose float32 reference logits
(expected.json) are ill-conditioned: where transformers' own float32 run is more than 2e-5 from its
float64 run, float32 rounding alone (in PyTorch or in tsorch) moves logits by ~1e-4, so the tests
compare against these float64 logits instead (same 1e-4 tolerance).
usage: /tmp/reference-venv/bin/python test/data/make_float64_logits.py [../shared/fixtures/tiny]"""
import json, os, sys
import numpy as np, torch
from transformers import AutoModelForCausalLM

tiny = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared/fixtures/tiny")
out_dir = os.path.join(os.path.dirname(__file__), "float64_logits")
os.makedirs(out_dir, exist_ok=True)
for name in sorted(os.listdir(tiny)):
    d = os.path.join(tiny, name)
    if not os.path.isfile(os.path.join(d, "expected.json")):
        continue
    e = json.load(open(os.path.join(d, "expected.json")))
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64, attn_implementation="eager", experts_implementation="eager")
    with torch.no_grad():
        logits = m(torch.tensor(e["input_ids"])).logits.numpy()
    gap = float(np.abs(np.array(e["logits"]) - logits).max())
    print(f"{name}: float32 reference is {gap:.2e} from float64")
    if gap > 2e-5:
        json.dump({"fixture": name, "float32_gap": gap, "transformers": __import__("transformers").__version__,
                   "logits": np.round(logits, 8).tolist()}, open(os.path.join(out_dir, f"{name}.json"), "w"))
