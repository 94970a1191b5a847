/**
 * Initial noise (diffusers' utils/torch_utils.py randn_tensor): standard-normal values from
 * tsorch's seeded generator (xoshiro128**, Box–Muller). The same seed gives the same tensor on every
 * run and device; it does not reproduce PyTorch's generator.
 */
import type { Device } from "../devices/device.js";
import { tensor } from "../tensor/index.js";
import type { Tensor } from "../tensor/tensor.js";
import { Random } from "../transformers/generation/rng.js";

/** float32 N(0, 1) of `shape` on `device` from `seed` (undefined: a random seed). */
export function randn(shape: number[], seed: number | undefined, device: Device): Tensor {
  const rng = new Random(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = 1 - rng.next(), v = rng.next();
    const r = Math.sqrt(-2 * Math.log(u));
    out[i] = r * Math.cos(2 * Math.PI * v);
    if (i + 1 < n) out[i + 1] = r * Math.sin(2 * Math.PI * v);
  }
  return tensor(out, { shape, device });
}

