"""Reference schedules of diffusers' FlowMatchEulerDiscreteScheduler for test/diffusers_flux.test.ts.

Run with the reference venv and diffusers' source on the path:
    PYTHONPATH=<diffusers>/src /tmp/reference-venv/bin/python test/data/flow_match_schedules.py > test/data/flow_match_schedules.json
Values are stored with float repr (no rounding): tsorch must reproduce them exactly in float32.
"""
import json

import numpy as np
from diffusers import FlowMatchEulerDiscreteScheduler
import diffusers

FLUX_DEV = dict(shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                base_image_seq_len=256, max_image_seq_len=4096)
CASES = [
    # (name, config, set_timesteps kwargs)
    ("flux_dev_sigmas_mu", FLUX_DEV, dict(num_inference_steps=7, sigmas=list(np.linspace(1.0, 1 / 7, 7)), mu=0.81)),
    ("flux_dev_no_sigmas", FLUX_DEV, dict(num_inference_steps=5, mu=1.05)),
    ("flux_dev_linear_shift", dict(FLUX_DEV, time_shift_type="linear"), dict(num_inference_steps=4, sigmas=list(np.linspace(1.0, 0.25, 4)), mu=0.7)),
    ("static_shift_3", dict(shift=3.0), dict(num_inference_steps=6)),
    ("static_shift_sigmas", dict(shift=1.7), dict(num_inference_steps=3, sigmas=[1.0, 0.6, 0.2])),
    ("custom_timesteps", dict(shift=2.0), dict(num_inference_steps=3, timesteps=[999.0, 500.0, 20.0])),
    ("shift_terminal", dict(shift=3.0, shift_terminal=0.1), dict(num_inference_steps=5)),
    ("karras", dict(shift=3.0, use_karras_sigmas=True), dict(num_inference_steps=5)),
    ("exponential", dict(shift=3.0, use_exponential_sigmas=True), dict(num_inference_steps=5)),
    ("invert_sigmas", dict(shift=3.0, invert_sigmas=True), dict(num_inference_steps=4)),
]

out = {"diffusers": diffusers.__version__, "cases": []}
for name, config, kwargs in CASES:
    s = FlowMatchEulerDiscreteScheduler(**config)
    s.set_timesteps(**kwargs)
    args = {k: (list(map(float, v)) if isinstance(v, list) else v) for k, v in kwargs.items()}
    out["cases"].append({"name": name, "config": config, "set_timesteps": args,
                         "timesteps": s.timesteps.tolist(), "sigmas": s.sigmas.tolist()})
print(json.dumps(out, indent=1))
