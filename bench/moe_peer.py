"""PyTorch + transformers peer of bench/moe_kernels.ts: greedy decode of a batch of random prompts.
usage: python moe_peer.py MODEL_DIR THREADS BATCH PROMPT NEW_TOKENS  (prints one JSON line)"""
import json, sys, time
import torch
from transformers import AutoModelForCausalLM

model_dir, threads, batch, prompt, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto").eval()
ids = torch.randint(0, model.config.vocab_size, (batch, prompt))


def run(n):
    with torch.inference_mode():
        t0 = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        return time.perf_counter() - t0


run(2)  # warm-up
first = run(1)
total = run(new)
print(json.dumps({"device": "cpu", "peer": f"torch {torch.__version__}", "dtype": str(model.dtype), "batch": batch, "prompt": prompt,
                  "new_tokens": new, "prefill_s": first, "decode_tokens_per_s": batch * (new - 1) / (total - first)}))
