/**
 * RMSNorm without a weight: x / sqrt(mean(x^2) + eps) over the last dim, float32 out (transformers'
 * Gemma4RMSNorm with with_scale=False, e.g. Gemma 4's v_norm). Composed of elementwise ops and a sum.
 */
import { add, div, mul, rsqrt, square, sum } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";

export function unscaledRmsNorm(x: Tensor, eps: number): Tensor {
  const n = x.shape[x.ndim - 1];
  return mul(x, rsqrt(add(div(sum(square(x), -1, true), n), eps)));
}
