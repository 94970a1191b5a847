"""PyTorch + transformers side of `npm run bench` (the peer measured in the same run).
Runs the same workload as bench/main.ts and prints one JSON object on stdout.
usage: python peer.py MODEL_DIR THREADS PROMPT_LEN NEW_TOKENS"""
import json, resource, statistics, sys, time
import torch
from transformers import AutoModelForCausalLM

model_dir, threads, prompt_len, new_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto").eval()
load_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
vocab = model.config.vocab_size


PREFILL_RUNS = 7  # as bench/main.ts
# The sampled decode's settings, as bench/main.ts's SAMPLING.
SAMPLING = dict(do_sample=True, temperature=0.7, top_k=50, top_p=0.9)


def run(batch, n, sampled=False):
    ids = torch.randint(0, vocab, (batch, prompt_len))
    with torch.inference_mode():
        t0 = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                       pad_token_id=0, **(SAMPLING if sampled else dict(do_sample=False)))
        return time.perf_counter() - t0


def decode_rate(batch, sampled=False):
    first = run(batch, 1, sampled)
    total = run(batch, new_tokens, sampled)
    return batch * (new_tokens - 1) / (total - first), first


run(1, 2)  # warm-up
with torch.inference_mode():
    # Medians of PREFILL_RUNS prompts (as bench/main.ts): all logits, then as generate's prefill,
    # the logits of the last position only.
    prefill, prefill_last = [], []
    for r in range(PREFILL_RUNS):
        ids = torch.randint(0, vocab, (1, prompt_len))
        t0 = time.perf_counter(); model(ids); prefill.append(time.perf_counter() - t0)
    for r in range(PREFILL_RUNS):
        ids = torch.randint(0, vocab, (1, prompt_len))
        t0 = time.perf_counter(); model(ids, logits_to_keep=1); prefill_last.append(time.perf_counter() - t0)
    prefill, prefill_last = statistics.median(prefill), statistics.median(prefill_last)
decode1, ttft = decode_rate(1)
decode8, _ = decode_rate(8)
decode1_sampled, _ = decode_rate(1, sampled=True)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def timeit(f, reps):
    f()
    t0 = time.perf_counter()
    for _ in range(reps):
        f()
    return (time.perf_counter() - t0) / reps


a = torch.randn(1024, 1024)
w32 = torch.randn(1024, 1024)
wbf = w32.to(torch.bfloat16)
abf = a.to(torch.bfloat16)
gemv_w = torch.randn(4096, 1024).to(torch.bfloat16)
gemv_x = torch.randn(1, 1024).to(torch.bfloat16)
with torch.inference_mode():
    gemm_f32 = 2 * 1024 ** 3 / timeit(lambda: torch.nn.functional.linear(a, w32), 5) / 1e9
    gemm_bf16 = 2 * 1024 ** 3 / timeit(lambda: torch.nn.functional.linear(abf, wbf), 5) / 1e9
    gemv_s = timeit(lambda: torch.nn.functional.linear(gemv_x, gemv_w), 200)

print(json.dumps({
    "prefill_tokens_per_s": prompt_len / prefill,
    "prefill_logits_to_keep_1_tokens_per_s": prompt_len / prefill_last,
    "decode_tokens_per_s_batch1": decode1,
    "decode_tokens_per_s_batch8": decode8,
    "decode_tokens_per_s_batch1_sampled": decode1_sampled,
    "time_to_first_token_s": ttft,
    "load_peak_rss_bytes": load_rss,
    "peak_rss_bytes": rss,
    "gemm_1024_gflops_f32": gemm_f32,
    "gemm_1024_gflops_bf16": gemm_bf16,
    "gemv_4096x1024_bf16_gb_per_s": 4096 * 1024 * 2 / gemv_s / 1e9,
    "torch": torch.__version__,
}))
