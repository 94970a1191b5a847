"""PyTorch + diffusers peer of bench/diffusion.ts: the same pipeline folder, sizes, steps, prompt and
guidance, timed the same way (a 1-step warm-up without decoding per size, then one timed run:
seconds per denoising step over steps 2.. and seconds per image). Prints one JSON line.

usage: python bench/diffusion_peer.py PIPELINE_DIR THREADS STEPS HxW[,HxW...]
(needs torch and diffusers, e.g. the reference venv with PYTHONPATH=<diffusers>/src)
"""
import json
import sys
import time

import torch
from diffusers import DiffusionPipeline

PROMPT = "A painting of a squirrel eating a burger"


def main() -> None:
    folder, threads, steps, sizes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(threads)
    pipe = DiffusionPipeline.from_pretrained(folder, torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    out = []
    for size in sizes.split(","):
        h, w = (int(x) for x in size.split("x"))
        common = dict(prompt=PROMPT, height=h, width=w, guidance_scale=7.5, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            pipe(num_inference_steps=1, output_type="latent", **common)
            marks = []

            def on_step(_pipe, _i, _t, kwargs):
                marks.append(time.perf_counter())
                return kwargs

            t0 = time.perf_counter()
            pipe(num_inference_steps=steps, output_type="np", callback_on_step_end=on_step, **common)
            end = time.perf_counter()
        per_step = (marks[-1] - marks[0]) / (len(marks) - 1) if len(marks) > 1 else marks[0] - t0
        out.append({"height": h, "width": w, "steps": steps, "seconds_per_step": per_step, "seconds_per_image": end - t0})
    print(json.dumps({"torch": torch.__version__, "sizes": out}))


if __name__ == "__main__":
    main()
