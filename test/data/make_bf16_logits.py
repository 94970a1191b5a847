"""Reference for test/bf16_gemm.test.ts: transformers' stories260K in bfloat16 (model.to(torch.bfloat16),
every activation bfloat16 as PyTorch computes it) and in float32, logits of every position for the two
prompts of ../shared/models/stories260K/expected.json. Writes test/data/bf16_logits.json.
usage: /tmp/reference-venv/bin/python test/data/make_bf16_logits.py ../shared/models/stories260K"""
import json, sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM

model_dir = Path(sys.argv[1])
prompts = [g["input_ids"] for g in json.loads((model_dir / "expected.json").read_text())["generation"]]
out = {"model": "stories260K", "transformers": __import__("transformers").__version__, "torch": torch.__version__, "cases": []}
for dtype in (torch.float32, torch.bfloat16):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(dtype).eval()
    for ids in prompts:
        with torch.inference_mode():
            logits = model(torch.tensor([ids])).logits[0].float()
        out["cases"].append({"dtype": str(dtype).removeprefix("torch."), "input_ids": ids,
                             "logits": [[round(v, 5) for v in row] for row in logits.tolist()]})
Path(__file__).with_name("bf16_logits.json").write_text(json.dumps(out))
