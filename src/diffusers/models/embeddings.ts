/**
 * Timestep embeddings (diffusers' models/embeddings.py): get_timestep_embedding (sinusoidal,
 * computed on device from a timestep tensor, float32 as torch does) and TimestepEmbedding
 * (linear_1 → act → linear_2).
 */
import type { Device } from "../../devices/device.js";
import { activation, type Activation } from "../../nn/activations.js";
import { Linear, Module } from "../../nn/index.js";
import { cat, cos, mul, sin, tensor } from "../../tensor/index.js";
import type { Tensor } from "../../tensor/tensor.js";

/**
 * The frequencies of diffusers' get_timestep_embedding, rounded in float32 steps as torch computes
 * them: freq_i = exp(−ln(maxPeriod)·i / (dim/2 − downscaleFreqShift)), i < dim/2.
 */
export function sinusoidFrequencies(dim: number, downscaleFreqShift: number, maxPeriod = 10000): Float32Array {
  const half = Math.floor(dim / 2);
  const f = Math.fround;
  return Float32Array.from({ length: half }, (_, i) => f(Math.exp(f(f(-Math.log(maxPeriod) * i) / f(half - downscaleFreqShift)))));
}

/**
 * Sinusoidal timestep embeddings computed on the timestep's device (so a compiled denoiser takes the
 * timestep as a tensor input): `timesteps` float32 [1] or [B] (a single value is broadcast to `batch`
 * rows) -> float32 [batch, dim] = [sin(t·f·scale), cos(t·f·scale)], or [cos, sin] with flipSinToCos;
 * an odd dim gets a zero column. The frequency table (see {@link sinusoidFrequencies}) is uploaded
 * once per device and cached, at the first eager call ({@link SinusoidalTimesteps.prepare}).
 * Throws RangeError when `timesteps` has neither 1 nor `batch` values.
 */
export class SinusoidalTimesteps {
  private readonly freqs: Float32Array;
  private cached: Tensor | null = null;
  constructor(readonly dim: number, readonly flipSinToCos: boolean, freqs: Float32Array, readonly scale = 1) {
    this.freqs = freqs;
  }
  /** Upload the frequency table to `device` (call outside a compiled function: an upload inside one is a graph break). */
  prepare(device: Device): Tensor {
    if (this.cached?.device !== device) this.cached = tensor(this.freqs, { shape: [1, this.freqs.length], dtype: "float32", device });
    return this.cached;
  }
  embed(timesteps: Tensor, batch: number): Tensor {
    const n = timesteps.numel;
    if (n !== 1 && n !== batch) throw new RangeError(`timestep embedding: ${n} timesteps for batch ${batch} (give 1 or ${batch})`);
    const t = timesteps.to("float32").reshape(n, 1).expand(batch, 1);
    let arg = mul(t, this.prepare(timesteps.device));
    if (this.scale !== 1) arg = arg.mul(this.scale);
    const [a, b] = this.flipSinToCos ? [cos(arg), sin(arg)] : [sin(arg), cos(arg)];
    const parts = [a, b];
    if (this.dim % 2 === 1) parts.push(arg.narrow(1, 0, 1).mul(0));
    return cat(parts, 1);
  }
}

/** A timestep given as a JS number (or one per row) as a float32 tensor on `device`. */
export function timestepTensor(t: number | readonly number[] | Tensor, device: Device): Tensor {
  if (typeof t !== "number" && !Array.isArray(t)) return t as Tensor;
  const a = typeof t === "number" ? [t] : [...(t as readonly number[])];
  return tensor(Float32Array.from(a), { shape: [a.length], dtype: "float32", device });
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
