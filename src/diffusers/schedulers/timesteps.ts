/**
 * Helpers the DDPM-family schedulers share (diffusers repeats them in each scheduler file):
 * timestep spacing and the conversion of a model prediction to (x0, ε).
 */
import type { Tensor } from "../../tensor/tensor.js";
import { SchedulerConfigError } from "./scheduling_utils.js";

/**
 * The inference timesteps, noisiest first, for `spacing` (diffusers' set_timesteps):
 * - "leading":  round(arange(n) · (N // n)) reversed, + offset;
 * - "trailing": round(arange(N, 0, −N / n)) − 1;
 * - "linspace": linspace(0, N − 1, n) reversed (rounded when `round`, as DDIM; Euler keeps floats).
 */
export function spacedTimesteps(spacing: string, N: number, n: number, offset: number, round: boolean): number[] {
  if (spacing === "leading") {
    const ratio = Math.floor(N / n);
    return Array.from({ length: n }, (_, i) => (n - 1 - i) * ratio + offset);
  }
  if (spacing === "trailing") {
    const ratio = N / n;
    return Array.from({ length: n }, (_, i) => roundHalfEven(N - i * ratio) - 1);
  }
  if (spacing === "linspace") {
    return Array.from({ length: n }, (_, i) => {
      const v = n > 1 ? ((N - 1) * (n - 1 - i)) / (n - 1) : 0;
      return round ? roundHalfEven(v) : Math.fround(v);
    });
  }
  throw new SchedulerConfigError(`timestep_spacing '${spacing}' is not supported; supported: leading, trailing, linspace`);
}

/** numpy's round (half to even). */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * (x0, ε) from the model output at a timestep with ᾱ_t = `alpha` for `predictionType`
 * "epsilon", "sample" or "v_prediction" (diffusers' DDIM step, section 3).
 */
export function predictionToX0AndEps(predictionType: string, modelOutput: Tensor, sample: Tensor, alpha: number): { x0: Tensor; eps: Tensor } {
  const a = Math.fround(Math.sqrt(alpha)), b = Math.fround(Math.sqrt(1 - alpha));
  if (predictionType === "epsilon") return { x0: sample.sub(modelOutput.mul(b)).div(a), eps: modelOutput };
  if (predictionType === "sample") return { x0: modelOutput, eps: sample.sub(modelOutput.mul(a)).div(b) };
  if (predictionType === "v_prediction") return { x0: sample.mul(a).sub(modelOutput.mul(b)), eps: modelOutput.mul(a).add(sample.mul(b)) };
  throw new SchedulerConfigError(`prediction_type '${predictionType}' is not supported; supported: epsilon, sample, v_prediction`);
}
