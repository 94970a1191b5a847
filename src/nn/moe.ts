/**
 * Sparse mixture-of-experts feed-forward block, shared by Mixtral and Qwen3-MoE (transformers'
 * MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock with their TopKRouter and Experts): a linear
 * router `gate` scores the experts, softmax (float32) -> top-k -> optional renormalisation, and each
 * token's output is the routing-weighted sum of its selected experts' gated MLPs
 * down(act(gate(x)) * up(x)). Routing stays on the device: the experts are applied with
 * `moeExperts` (silu; one fused kernel on cpu) or else `gatherLinear`, which pick each row's expert
 * weight without reading indices on the host. The
 * experts' weights are stacked into one tensor per projection on first use (each expert's
 * parameters then view it), so a device can run all experts in one grouped GEMM.
 */
import { cat, div, gatherLinear, moeExperts, mul, silu, softmax, stack, sum, topk } from "../tensor/ops.js";
import { keep, tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { activation, type Activation } from "./activations.js";
import { Linear } from "./layers.js";
import { useKernelForwardFromHub, type KernelMoeBlock, type KernelMoeParts } from "./kernel_hub.js";
import { Module, ModuleList } from "./module.js";

/** The gate, up and down projections of one expert (named as its checkpoint names them). */
export type ExpertProjections<E> = (expert: E) => { gate: Linear; up: Linear; down: Linear };

export interface SparseMoeOptions {
  hiddenSize: number;
  numExperts: number;
  /** Experts per token (num_experts_per_tok). */
  topK: number;
  /** Divide the top-k probabilities by their sum (Mixtral always; Qwen3-MoE when norm_topk_prob). */
  normTopkProb: boolean;
  hiddenAct: string;
}

/**
 * Router `gate` (Linear hidden -> numExperts, no bias) and `experts` (ModuleList of E).
 * forward: x [B, L, hidden] -> float32 [B, L, hidden].
 */
export class SparseMoeBlock<E extends Module> extends Module implements KernelMoeBlock {
  readonly gate: Linear;
  readonly experts: ModuleList<E>;
  private readonly act: Activation;
  private stacked?: { gateUp: Tensor; down: Tensor };

  constructor(readonly o: SparseMoeOptions, makeExpert: () => E, readonly projections: ExpertProjections<E>) {
    super();
    this.gate = this.module("gate", new Linear(o.hiddenSize, o.numExperts, false));
    this.experts = this.module("experts", new ModuleList(Array.from({ length: o.numExperts }, makeExpert)));
    this.act = activation(o.hiddenAct);
  }

  forward(x: Tensor): Tensor {
    return tidy(() => this.route(x));
  }

  private route(x: Tensor): Tensor {
    const [B, L, H] = x.shape, T = B * L, k = this.o.topK;
    const flat = x.reshape(T, H);
    const { weights, indices } = routeTopK(this.gate.forward(flat), k, this.o.normTopkProb);
    const { gateUp, down } = this.stackedExperts();
    if (this.act === silu) return moeExperts(flat, gateUp, down, weights, indices).view(B, L, H);
    // One row per (token, selected expert): [T * k, H] with its expert index.
    const rows = flat.unsqueeze(1).expand(T, k, H).reshape(T * k, H);
    const idx = indices.reshape(T * k);
    const p = this.experts.items.map(this.projections);
    const w = (pick: (q: (typeof p)[number]) => Linear) => p.map((q) => pick(q).weight.value);
    const h = mul(this.act(gatherLinear(rows, w((q) => q.gate), idx)), gatherLinear(rows, w((q) => q.up), idx));
    const y = gatherLinear(h, w((q) => q.down), idx).view(T, k, H);
    return sum(mul(y, weights.unsqueeze(2)), 1).view(B, L, H);
  }

  /**
   * The experts' weights stacked, in the dtype they were loaded in: gate_up [E, 2I, H] (expert e's
   * gate in rows 0..I, up in rows I..2I) and down [E, H, I]. Made once (again after the parameters
   * were replaced, e.g. moved by `to`); each expert's parameters are then views of the stacks, so
   * no weight is held twice.
   */
  stackedExperts(): { gateUp: Tensor; down: Tensor } {
    this.stacked = stackExperts(this.experts.items.map(this.projections), this.stacked);
    return this.stacked;
  }

  kernelMoe(): KernelMoeParts | string {
    if (this.o.hiddenAct !== "silu") return `its experts' activation is ${this.o.hiddenAct}; the MoE kernel contract is silu`;
    return {
      route: (flat) => routeTopK(this.gate.forward(flat), this.o.topK, this.o.normTopkProb),
      experts: () => this.stackedExperts(),
      finish: (_flat, routed) => routed,
    };
  }
}
useKernelForwardFromHub("MoE")(SparseMoeBlock);

/**
 * Experts' gated-MLP weights stacked, in the dtype they were loaded in: gate_up [E, 2I, H] (expert
 * e's gate in rows 0..I, up in rows I..2I) and down [E, H, I]. Returns `prev` while every expert's
 * parameters still view it; otherwise stacks anew (e.g. after `to` moved the parameters) and makes
 * each expert's parameters views of the stacks, so no weight is held twice.
 */
export function stackExperts(p: { gate: Linear; up: Linear; down: Linear }[], prev?: { gateUp: Tensor; down: Tensor }): { gateUp: Tensor; down: Tensor } {
  if (prev && p.every((q) => q.gate.weight.value.storage === prev.gateUp.storage && q.up.weight.value.storage === prev.gateUp.storage && q.down.weight.value.storage === prev.down.storage)) return prev;
  const [gateUp, down] = tidy(() => [
    stack(p.map((q) => cat([q.gate.weight.value, q.up.weight.value], 0))),
    stack(p.map((q) => q.down.weight.value)),
  ]);
  const I = p[0].gate.weight.shape[0];
  p.forEach((q, e) => {
    q.gate.weight.set(gateUp.select(0, e).narrow(0, 0, I));
    q.up.weight.set(gateUp.select(0, e).narrow(0, I, I));
    q.down.weight.set(down.select(0, e));
  });
  return { gateUp: keep(gateUp), down: keep(down) };
}

/**
 * Top-k routing of router logits [T, E]: softmax in float32, the k largest probabilities (largest
 * first) and their expert indices [T, k], renormalised to sum to 1 when `normalize`.
 */
export function routeTopK(logits: Tensor, k: number, normalize: boolean): { weights: Tensor; indices: Tensor } {
  const { values, indices } = topk(softmax(logits, -1), k);
  return { weights: normalize ? div(values, sum(values, -1, true)) : values, indices };
}
