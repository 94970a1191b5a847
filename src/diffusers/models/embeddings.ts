/**
 * Timestep embeddings (diffusers' models/embeddings.py): get_timestep_embedding (sinusoidal,
 * computed on the host in float32 steps as torch does) and TimestepEmbedding (linear_1 → act →
 * linear_2).
 */
import type { Device } from "../../devices/device.js";
import { activation, type Activation } from "../../nn/activations.js";
import { Linear, Module } from "../../nn/index.js";
import { tensor } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";

/**
 * Sinusoidal embeddings of `timesteps` (one per batch row) -> float32 [B, dim] on `device`:
 * freq_i = exp(−ln(10000)·i / (dim/2 − downscaleFreqShift)); [sin(t·freq), cos(t·freq)], or
 * [cos, sin] with flipSinToCos; an odd dim gets a zero column.
 */
export function timestepEmbedding(timesteps: number[], dim: number, flipSinToCos: boolean, downscaleFreqShift: number, device: Device, scale = 1, maxPeriod = 10000): Tensor {
  const half = Math.floor(dim / 2);
  const f = Math.fround;
  const freqs = Array.from({ length: half }, (_, i) => f(Math.exp(f(f(-Math.log(maxPeriod) * i) / f(half - downscaleFreqShift)))));
  const out = new Float32Array(timesteps.length * dim);
  timesteps.forEach((t, b) => {
    for (let i = 0; i < half; i++) {
      const arg = f(f(f(t) * freqs[i]) * scale);
      const s = Math.sin(arg), c = Math.cos(arg);
      out[b * dim + i] = flipSinToCos ? c : s;
      out[b * dim + half + i] = flipSinToCos ? s : c;
    }
  });
  return tensor(out, { shape: [timesteps.length, dim], device });
}

/** TimestepEmbedding: linear_1 (in → timeEmbedDim) → act → linear_2. */
export class TimestepEmbedding extends Module {
  readonly linear_1: Linear;
  readonly linear_2: Linear;
  private readonly act: Activation;
  constructor(inChannels: number, timeEmbedDim: number, act: string) {
    super();
    this.linear_1 = this.module("linear_1", new Linear(inChannels, timeEmbedDim));
    this.linear_2 = this.module("linear_2", new Linear(timeEmbedDim, timeEmbedDim));
    this.act = activation(act);
  }
  forward(x: Tensor): Tensor {
    return this.linear_2.forward(this.act(this.linear_1.forward(x)));
  }
}
