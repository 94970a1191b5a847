"""Reference for the FLUX.1-schnell layout (guidance_embeds false) of FluxTransformer2DModel, batch 2.

Loads ../shared/fixtures/diffusers/flux_tiny/transformer without its guidance_embedder into a model
configured with guidance_embeds=False, and runs one forward on a batch of two rows (the fixture's
32x32 initial latents and their negation; the fixture's T5/CLIP embeddings, the second row scaled by
0.5) at timesteps 1.0 and 0.25. Run from the project root with the reference venv and diffusers' source:
    PYTHONPATH=<diffusers>/src /tmp/reference-venv/bin/python test/data/flux_no_guidance.py > test/data/flux_no_guidance.json
"""
import json

import torch
from diffusers import FluxTransformer2DModel
from safetensors.torch import load_file

ROOT = "../shared/fixtures/diffusers/flux_tiny"
config = json.load(open(f"{ROOT}/transformer/config.json"))
config = {k: v for k, v in config.items() if not k.startswith("_")}
config["guidance_embeds"] = False
model = FluxTransformer2DModel(**config)
state = {k: v for k, v in load_file(f"{ROOT}/transformer/diffusion_pytorch_model.safetensors").items() if "guidance_embedder" not in k}
model.load_state_dict(state, strict=True)
model.eval()

case = json.load(open(f"{ROOT}/expected.json"))["cases"][0]
x = torch.tensor(case["initial_latents"])
txt = torch.tensor(case["prompt_embeds"])
pooled = torch.tensor(case["pooled_prompt_embeds"])
with torch.no_grad():
    out = model(
        hidden_states=torch.cat([x, -x]), encoder_hidden_states=torch.cat([txt, 0.5 * txt]),
        pooled_projections=torch.cat([pooled, 0.5 * pooled]), timestep=torch.tensor([1.0, 0.25]),
        img_ids=torch.tensor(case["latent_image_ids"]), txt_ids=torch.tensor(case["text_ids"]), guidance=None, return_dict=False,
    )[0]
print(json.dumps({"case": case["name"], "timestep": [1.0, 0.25], "output": [[[round(v, 6) for v in row] for row in b] for b in out.tolist()]}))
