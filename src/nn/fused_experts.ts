/**
 * Mixture-of-experts weights stored as 3-D tensors, as Qwen3.5-MoE and Gemma 4 checkpoints hold
 * them (transformers' `@use_experts_implementation` Experts modules, e.g. Qwen3_5MoeExperts,
 * Gemma4TextExperts): `gate_up_proj` [E, 2I, H] holds per expert the gate rows then the up rows,
 * `down_proj` [E, H, I] (both out × in, like nn.Linear). Each token's output is the routing-weighted
 * sum over its selected experts of down(act(gate(x)) * up(x)). Routing stays on the device: with
 * silu the fused tensors go to `moeExperts` as they are; otherwise every expert matrix is a view
 * into the fused tensor, picked per row by `gatherLinear`.
 */
import { gatherLinear, moeExperts, mul, silu, sum } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";
import { activation, type Activation } from "./activations.js";
import { Module, type Parameter } from "./module.js";

export class FusedExperts extends Module {
  readonly gate_up_proj: Parameter;
  readonly down_proj: Parameter;
  private readonly act: Activation;

  constructor(readonly numExperts: number, readonly hiddenSize: number, readonly intermediateSize: number, hiddenAct: string) {
    super();
    this.gate_up_proj = this.param("gate_up_proj", [numExperts, 2 * intermediateSize, hiddenSize]);
    this.down_proj = this.param("down_proj", [numExperts, hiddenSize, intermediateSize]);
    this.act = activation(hiddenAct);
  }

  /**
   * x [T, H]; weights [T, k] float32 routing weights; indices [T, k] int64 expert ids
   * -> float32 [T, H] = sum_j weights[t, j] * expert_{indices[t, j]}(x[t]).
   */
  forward(x: Tensor, weights: Tensor, indices: Tensor): Tensor {
    const gateUp = this.gate_up_proj.value, down = this.down_proj.value;
    if (this.act === silu) return moeExperts(x, gateUp, down, weights, indices);
    const [T, H] = x.shape, k = indices.shape[1], I = this.intermediateSize;
    const rows = x.unsqueeze(1).expand(T, k, H).reshape(T * k, H);
    const idx = indices.reshape(T * k);
    const experts = Array.from({ length: this.numExperts }, (_, e) => e);
    const gate = gatherLinear(rows, experts.map((e) => gateUp.select(0, e).narrow(0, 0, I)), idx);
    const up = gatherLinear(rows, experts.map((e) => gateUp.select(0, e).narrow(0, I, I)), idx);
    const y = gatherLinear(mul(this.act(gate), up), experts.map((e) => down.select(0, e)), idx).view(T, k, H);
    return sum(mul(y, weights.unsqueeze(2)), 1);
  }
}
