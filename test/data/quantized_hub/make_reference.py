"""
Reference outputs for tsorch's pre-quantized Hub formats (GPTQ, AWQ, FP8 block-scaled), written to
reference.json beside this script; the quantized checkpoints go under /tmp (never committed).

For each float fixture (stories260K, the tiny llama and qwen3) and each format, this script
1. quantizes the decoder layers' Linear weights round-to-nearest (the layout matters here, not the
   GPTQ/AWQ search: these are the files GPTQ/AWQ/FP8 tools write, with RTN codes) and packs them
   exactly as the tools lay them out:
   - GPTQ (AutoGPTQ / GPTQModel, checkpoint_format "gptq" = v1): qweight int32 [K / (32/bits), N]
     packed along K, low bits first; qzeros int32 [K/g, N / (32/bits)] packed along N, holding
     zero - 1; scales float16 [K/g, N]; g_idx int32 [K] (k // g, or a permuted order for desc_act);
   - AWQ (AutoAWQ, version "gemm"): qweight int32 [K, N/8] and qzeros int32 [K/g, N/8] packed along
     N in the order [0, 2, 4, 6, 1, 3, 5, 7]; scales float16 [K/g, N];
   - FP8 (DeepSeek-V3 / Qwen3-FP8, quant_method "fp8", weight_block_size [128, 128]): weight
     float8_e4m3fn [N, K] and weight_scale_inv float32 [ceil(N/128), ceil(K/128)] (the multiplier).
2. writes the checkpoint under /tmp/tsorch-quant-fixtures/<model>-<variant>/ and records the SHA-256
   of every packed tensor (test/helpers/hub_quant_pack.ts must produce the same bytes);
3. dequantizes those tensors independently of tsorch (unpacking as the tools' own dequantizers do),
   runs transformers on the dequantized weights, and records last-position logits and 16 greedy new
   tokens per prompt; and the error against the float model (max |logit diff| over every position,
   greedy agreement over 32 new tokens).
4. FP8 only: where transformers' own FP8 loader runs on cpu (quantization_config dequantize, needs
   accelerate), checks it gives the same logits as step 3.

Run: /tmp/reference-venv/bin/python test/data/quantized_hub/make_reference.py
"""
import hashlib
import json
import math
import os
import shutil
import sys

import safetensors.torch as st
import torch
import transformers
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.abspath(os.path.join(HERE, "../../../../shared"))
OUT_DIR = "/tmp/tsorch-quant-fixtures"
MODELS = {
    "stories260K": os.path.join(SHARED, "models/stories260K"),
    "llama": os.path.join(SHARED, "fixtures/tiny/llama"),
    "qwen3": os.path.join(SHARED, "fixtures/tiny/qwen3"),
}
VARIANTS = {
    "gptq4": {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True, "checkpoint_format": "gptq"},
    "gptq4-actorder": {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True, "sym": False, "checkpoint_format": "gptq"},
    "gptq8": {"quant_method": "gptq", "bits": 8, "group_size": 32, "desc_act": False, "sym": True, "checkpoint_format": "gptq"},
    "awq4": {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"},
    "fp8": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
}
PROJ = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
NEW_TOKENS = 16


def prompts(model):
    exp = json.load(open(os.path.join(MODELS[model], "expected.json")))
    return [g["input_ids"] for g in exp["generation"][:2]] if model == "stories260K" else exp["input_ids"][:2]


def fits(cfg, N, K):
    """Whether a [N, K] weight can take the format (else the tools leave it float)."""
    if cfg["quant_method"] == "fp8":
        return K % 4 == 0
    pack = 32 // cfg["bits"]
    return K % cfg["group_size"] == 0 and K % pack == 0 and N % pack == 0


def act_order(K):
    """A fixed permutation of the K inputs standing in for GPTQ's descending-Hessian order."""
    p = next(p for p in (37, 41, 43, 47) if math.gcd(p, K) == 1)
    return [(i * p) % K for i in range(K)]


def rtn_groups(W, cfg):
    """Round-to-nearest codes [N, K], zeros and float16 scales [G, N], g_idx [K] as GPTQ's quantizer."""
    N, K = W.shape
    bits, g = cfg["bits"], cfg["group_size"]
    maxq = 2 ** bits - 1
    order = act_order(K) if cfg.get("desc_act") else list(range(K))
    g_idx = torch.empty(K, dtype=torch.int32)
    g_idx[torch.tensor(order)] = torch.arange(K, dtype=torch.int32) // g
    G = K // g
    scales = torch.empty(G, N, dtype=torch.float16)
    zeros = torch.empty(G, N, dtype=torch.int32)
    for gi in range(G):
        cols = W[:, g_idx == gi]  # [N, g]
        mn = torch.clamp(cols.min(dim=1).values, max=0.0)
        mx = torch.clamp(cols.max(dim=1).values, min=0.0)
        if cfg.get("sym"):
            mx = torch.maximum(-mn, mx)
            mn = torch.where(mn < 0, -mx, mn)
        both0 = (mn == 0) & (mx == 0)
        mn = torch.where(both0, torch.full_like(mn, -1.0), mn)
        mx = torch.where(both0, torch.full_like(mx, 1.0), mx)
        s = ((mx - mn) / maxq).to(torch.float16)
        scales[gi] = s
        if cfg.get("sym"):
            zeros[gi] = (maxq + 1) // 2
        else:
            zeros[gi] = torch.clamp(torch.round(-mn / s.float()), 0, maxq).to(torch.int32)
    sf = scales.float()[g_idx.long()].t()  # [N, K]
    z = zeros[g_idx.long()].t()
    q = torch.clamp(torch.round(W / sf).to(torch.int32) + z, 0, maxq)
    return q, zeros, scales, g_idx


def pack(codes, bits, dim, order=None):
    """Pack int codes along `dim` into int32 words, low bits first (order: which element each slot holds)."""
    per = 32 // bits
    c = codes.to(torch.int64).movedim(dim, -1)
    c = c.reshape(*c.shape[:-1], c.shape[-1] // per, per)
    if order is not None:
        c = c[..., order]
    word = torch.zeros(c.shape[:-1], dtype=torch.int64)
    for i in range(per):
        word |= (c[..., i] & (2 ** bits - 1)) << (bits * i)
    word = torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)
    return word.movedim(-1, dim).contiguous()


def unpack(words, bits, dim, order=None):
    """Inverse of pack: int32 words -> codes, slots re-ordered back when `order` is given."""
    per = 32 // bits
    w = words.to(torch.int64).movedim(dim, -1) & 0xFFFFFFFF
    c = torch.stack([(w >> (bits * i)) & (2 ** bits - 1) for i in range(per)], dim=-1)
    if order is not None:
        inv = [order.index(j) for j in range(per)]
        c = c[..., inv]
    return c.reshape(*c.shape[:-2], -1).movedim(-1, dim)


def quantize(name, W, cfg):
    """The checkpoint tensors of one Linear weight [N, K] in the format of `cfg`."""
    base = name[: -len(".weight")]
    if cfg["quant_method"] == "fp8":
        bn, bk = cfg["weight_block_size"]
        N, K = W.shape
        S = torch.empty(math.ceil(N / bn), math.ceil(K / bk), dtype=torch.float32)
        q = torch.empty(N, K, dtype=torch.float8_e4m3fn)
        for i in range(S.shape[0]):
            for j in range(S.shape[1]):
                blk = W[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk]
                amax = blk.abs().max()
                s = amax / 448.0 if amax > 0 else torch.tensor(1.0)
                S[i, j] = s
                q[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk] = torch.clamp(blk / S[i, j], -448.0, 448.0).to(torch.float8_e4m3fn)
        return {f"{base}.weight": q, f"{base}.weight_scale_inv": S}
    q, zeros, scales, g_idx = rtn_groups(W, cfg)
    bits = cfg["bits"]
    if cfg["quant_method"] == "gptq":
        return {f"{base}.qweight": pack(q.t(), bits, 0), f"{base}.qzeros": pack(zeros - 1, bits, 1),
                f"{base}.scales": scales, f"{base}.g_idx": g_idx}
    return {f"{base}.qweight": pack(q.t(), bits, 1, AWQ_ORDER), f"{base}.qzeros": pack(zeros, bits, 1, AWQ_ORDER),
            f"{base}.scales": scales}


def dequantize(base, t, cfg):
    """Float32 weight [N, K] from the packed tensors (the tools' dequantizers' formulas)."""
    if cfg["quant_method"] == "fp8":
        q = t[f"{base}.weight"].float()
        S = t[f"{base}.weight_scale_inv"]
        bn, bk = cfg["weight_block_size"]
        N, K = q.shape
        s = S.repeat_interleave(bn, 0)[:N].repeat_interleave(bk, 1)[:, :K]
        return q * s
    bits = cfg["bits"]
    scales = t[f"{base}.scales"].float()
    if cfg["quant_method"] == "gptq":
        q = unpack(t[f"{base}.qweight"], bits, 0)  # [K, N]
        z = unpack(t[f"{base}.qzeros"], bits, 1) + 1  # v1: stored zero - 1
        g = t[f"{base}.g_idx"].long()
    else:
        q = unpack(t[f"{base}.qweight"], bits, 1, AWQ_ORDER)
        z = unpack(t[f"{base}.qzeros"], bits, 1, AWQ_ORDER)
        g = torch.arange(q.shape[0]) // cfg["group_size"]
    return ((q - z[g]).float() * scales[g]).t().contiguous()


def sha(t):
    b = t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t
    return hashlib.sha256(b.contiguous().numpy().tobytes()).hexdigest()


@torch.no_grad()
def run(model, ids_list):
    """Last-position logits, all-position logits and greedy new tokens per prompt."""
    out = []
    for ids in ids_list:
        x = torch.tensor([ids])
        logits = model(x).logits[0]
        gen = model.generate(x, max_new_tokens=32, min_new_tokens=32, do_sample=False, eos_token_id=None, pad_token_id=0)
        out.append({"logits": logits, "greedy": gen[0, len(ids):].tolist()})
    return out


def agree(a, b):
    n = 0
    while n < len(a) and a[n] == b[n]:
        n += 1
    return n


def main():
    torch.manual_seed(0)
    ref = {"script": "test/data/quantized_hub/make_reference.py",
           "reference": f"transformers {transformers.__version__}, torch {torch.__version__}",
           "new_tokens": NEW_TOKENS, "variants": {}}
    for model_name, src in MODELS.items():
        float_sd = st.load_file(os.path.join(src, "model.safetensors"))
        base_model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
        ids_list = prompts(model_name)
        float_runs = run(base_model, ids_list)
        for vname, cfg in VARIANTS.items():
            packed, quantized = {}, []
            for name, W in float_sd.items():
                if not (name.endswith(".weight") and name.split(".")[-2] in PROJ):
                    continue
                if fits(cfg, *W.shape):
                    packed.update(quantize(name, W.float(), cfg))
                    quantized.append(name[: -len(".weight")])
            out = os.path.join(OUT_DIR, f"{model_name}-{vname}")
            os.makedirs(out, exist_ok=True)
            ckpt = {k: v for k, v in float_sd.items() if k[: -len(".weight")] not in quantized}
            ckpt.update(packed)
            st.save_file(ckpt, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
            config = json.load(open(os.path.join(src, "config.json")))
            config["quantization_config"] = cfg
            json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
            for f in os.listdir(src):
                if f.startswith("tokenizer") or f == "generation_config.json":
                    shutil.copy(os.path.join(src, f), out)
            deq = dict(float_sd)
            for base in quantized:
                deq[f"{base}.weight"] = dequantize(base, packed, cfg)
            qmodel = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
            qmodel.load_state_dict(deq, strict=False)
            qruns = run(qmodel, ids_list)
            entry = {
                "quantization_config": cfg, "quantized": quantized,
                "tensor_sha256": {k: sha(v) for k, v in sorted(packed.items())},
                "prompts": [{"input_ids": ids, "last_logits": [round(x, 6) for x in r["logits"][-1].tolist()],
                             "greedy": r["greedy"][:NEW_TOKENS]} for ids, r in zip(ids_list, qruns)],
                "vs_float": {
                    "max_logit_err": round(max((r["logits"] - f["logits"]).abs().max().item() for r, f in zip(qruns, float_runs)), 4),
                    "greedy_agree_of_32": [agree(r["greedy"], f["greedy"]) for r, f in zip(qruns, float_runs)],
                },
            }
            if cfg["quant_method"] == "fp8":
                entry["transformers_fp8_loader"] = check_fp8_loader(out, qruns, ids_list)
            ref["variants"][f"{model_name}/{vname}"] = entry
            print(model_name, vname, len(quantized), "layers", entry["vs_float"], entry.get("transformers_fp8_loader", ""), file=sys.stderr)
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


@torch.no_grad()
def check_fp8_loader(path, qruns, ids_list):
    """transformers' own FP8 loader (cpu: dequantize) against the script's dequantization."""
    try:
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    except Exception as e:  # accelerate missing, or shapes its dequantizer refuses
        return f"not run: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    err = max((m(torch.tensor([ids])).logits[0] - r["logits"]).abs().max().item() for ids, r in zip(ids_list, qruns))
    return f"max |logit diff| vs this script's dequantization: {err:.2e}"


if __name__ == "__main__":
    main()
