/** Activation functions by their config.json `hidden_act` names (transformers' ACT2FN). */
import { gelu, geluTanh, relu, sigmoid, silu, mul } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";

export type Activation = (x: Tensor) => Tensor;

const ACT2FN: Record<string, Activation> = {
  silu, swish: silu,
  gelu,
  gelu_new: geluTanh, gelu_pytorch_tanh: geluTanh, gelu_fast: geluTanh,
  relu,
  quick_gelu: (x) => mul(x, sigmoid(mul(x, 1.702))),
};

/** The activation for a `hidden_act` name; throws naming the supported ones. */
export function activation(name: string): Activation {
  const fn = ACT2FN[name];
  if (!fn) throw new Error(`unsupported activation '${name}'; supported: ${Object.keys(ACT2FN).join(", ")}`);
  return fn;
}
