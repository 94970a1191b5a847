"""Reference for test/diffusers_sd.test.ts: AutoencoderKL.encode of sd_tiny's VAE (diffusers) on a
fixed image, x[b, c, h, w] = sin(0.3·h + 0.7·w + 1.1·c) (in [-1, 1]), shape [1, 3, 32, 32].
Writes test/data/diffusers_vae_encode.json: the latent distribution's mean and logvar [1, 4, 16, 16].

usage: PYTHONPATH=<diffusers>/src python test/data/diffusers_vae_encode.py ../shared/fixtures/diffusers/sd_tiny
(the reference venv of ../shared/tools/reference-venv.sh has torch; diffusers from its GitHub source)
"""
import json
import os
import sys

import torch
from diffusers import AutoencoderKL


def main() -> None:
    vae = AutoencoderKL.from_pretrained(os.path.join(sys.argv[1], "vae")).eval()
    c, h, w = torch.meshgrid(torch.arange(3.0), torch.arange(32.0), torch.arange(32.0), indexing="ij")
    x = torch.sin(0.3 * h + 0.7 * w + 1.1 * c)[None]
    with torch.no_grad():
        dist = vae.encode(x).latent_dist
    r = lambda t: torch.round(t * 1e6).div(1e6).tolist()
    out = {"shape": list(x.shape), "mean": r(dist.mean), "logvar": r(dist.logvar)}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "diffusers_vae_encode.json")
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
