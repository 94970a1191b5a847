"""Writes a random Qwen3.5 text checkpoint with Qwen3.5-0.8B's layer shapes but only 4 layers
(3 Gated DeltaNet + 1 full attention), for the prefill-scaling bench. Write it under /tmp.
usage: /tmp/reference-venv/bin/python bench/make_qwen3_5_model.py OUT_DIR [--dtype bfloat16|float32]"""
import argparse, torch
from transformers import AutoConfig, AutoModelForCausalLM

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
a = p.parse_args()
torch.manual_seed(0)
cfg = AutoConfig.for_model(
    "qwen3_5_text", vocab_size=32000, hidden_size=1024, intermediate_size=3584, num_hidden_layers=4,
    layer_types=["linear_attention"] * 3 + ["full_attention"], num_attention_heads=8,
    num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=16,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    max_position_embeddings=262144, tie_word_embeddings=True)
model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, a.dtype))
model.save_pretrained(a.out, safe_serialization=True)
print(a.out, a.dtype, sum(p.numel() for p in model.parameters()), "parameters")
