"""Reference for test/gpt_oss_mxfp4.test.ts: transformers' own MXFP4 decoding
(integrations/mxfp4.py convert_moe_packed_tensors) of a few random blocks and scales, so the test
pins tsorch's dequantizeMxfp4 to the convention the gpt-oss Hub files are read with.

Run with the reference venv: /tmp/reference-venv/bin/python test/data/make_mxfp4_reference.py
"""
import json
import pathlib

import torch
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

g = torch.Generator().manual_seed(0)
E, OUT, NB = 2, 3, 2
blocks = torch.randint(0, 256, (E, OUT, NB, 16), generator=g, dtype=torch.int32).to(torch.uint8)
scales = torch.randint(120, 135, (E, OUT, NB), generator=g, dtype=torch.int32).to(torch.uint8)
# [E, in, out] (input-major, as GptOssExperts holds it) in float32.
dequantized = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
out = {
    "transformers": __import__("transformers").__version__,
    "blocks": blocks.tolist(),
    "scales": scales.tolist(),
    "dequantized": dequantized.tolist(),
}
pathlib.Path(__file__).with_name("mxfp4_reference.json").write_text(json.dumps(out) + "\n")
