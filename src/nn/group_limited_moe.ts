/**
 * DeepSeek-V3's mixture-of-experts block, which GLM-4.5 (Glm4MoeMoE) repeats: transformers'
 * DeepseekV3TopkRouter + DeepseekV3NaiveMoe + shared experts (models/deepseek_v3/modeling_deepseek_v3.py).
 *
 * Router `gate` (weight [E, hidden], e_score_correction_bias [E]), in float32:
 *   s = sigmoid(x W^T); choice = s + bias;
 *   the experts form n_group groups, each scored by the sum of its two best choice values; the
 *   best topk_group groups stay, the others' experts are masked to -inf; the top-k experts of the
 *   masked choice are taken, weighted by their unbiased s (divided by their sum + 1e-20 when
 *   norm_topk_prob), times routed_scaling_factor.
 * out = sum_k w_k * expert_k(x) + shared_experts(x), experts being gated MLPs
 * `experts.N.{gate,up,down}_proj` as the Hub files store them. Routing stays on the device.
 */
import { add, div, eq, gatherLinear, linear, moeExperts, mul, sigmoid, silu, sum, topk, where } from "../tensor/ops.js";
import { arange } from "../tensor/creation.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { activation, type Activation } from "./activations.js";
import { Linear } from "./layers.js";
import { GatedMLP } from "./mlp.js";
import { useKernelForwardFromHub, type KernelMoeBlock, type KernelMoeParts } from "./kernel_hub.js";
import { Module, ModuleList, type Parameter } from "./module.js";
import { stackExperts } from "./moe.js";

export interface GroupLimitedMoeOptions {
  hiddenSize: number;
  /** n_routed_experts E. */
  numExperts: number;
  /** num_experts_per_tok. */
  topK: number;
  /** n_group (E must divide into groups of at least 2). */
  numGroups: number;
  /** topk_group: groups kept per token. */
  topkGroup: number;
  normTopkProb: boolean;
  routedScalingFactor: number;
  /** moe_intermediate_size (each routed expert). */
  expertIntermediateSize: number;
  /** Intermediate size of `shared_experts` (moe_intermediate_size * n_shared_experts). */
  sharedIntermediateSize: number;
  hiddenAct: string;
}

/** The config fields of DeepSeek-V3 and GLM-4-MoE (camel-cased config.json names) that size their MoE. */
export interface DeepseekStyleMoeConfig {
  hiddenSize: number;
  nRoutedExperts: number;
  numExpertsPerTok: number;
  nGroup: number;
  topkGroup: number;
  normTopkProb: boolean;
  routedScalingFactor: number;
  moeIntermediateSize: number;
  nSharedExperts: number;
  hiddenAct: string;
}

/** GroupLimitedMoe options from a DeepSeek-V3 / GLM-4-MoE config (shared experts: n_shared_experts x moe_intermediate_size). */
export function groupLimitedMoeOptions(c: DeepseekStyleMoeConfig): GroupLimitedMoeOptions {
  return {
    hiddenSize: c.hiddenSize, numExperts: c.nRoutedExperts, topK: c.numExpertsPerTok, numGroups: c.nGroup,
    topkGroup: c.topkGroup, normTopkProb: c.normTopkProb, routedScalingFactor: c.routedScalingFactor,
    expertIntermediateSize: c.moeIntermediateSize, sharedIntermediateSize: c.moeIntermediateSize * c.nSharedExperts,
    hiddenAct: c.hiddenAct,
  };
}

/** The router: `weight` [E, hidden] and the choice-only `e_score_correction_bias` [E], kept in float32 as transformers keeps it. */
export class GroupLimitedRouter extends Module {
  readonly weight: Parameter;
  readonly e_score_correction_bias: Parameter;
  constructor(private readonly o: GroupLimitedMoeOptions) {
    super();
    if (o.numExperts % o.numGroups || o.numExperts / o.numGroups < 2 || o.topkGroup > o.numGroups || o.topK > o.numExperts) {
      throw new RangeError(`group-limited routing: ${o.numExperts} experts in ${o.numGroups} groups (keep ${o.topkGroup}), top ${o.topK}: experts must split into groups of at least 2`);
    }
    this.weight = this.param("weight", [o.numExperts, o.hiddenSize]);
    this.e_score_correction_bias = this.param("e_score_correction_bias", [o.numExperts], "float32");
  }

  /** x [T, hidden] -> routing weights float32 [T, k] and expert indices int64 [T, k]. */
  forward(x: Tensor): { weights: Tensor; indices: Tensor } {
    const { numExperts: E, numGroups: G, topkGroup, topK } = this.o;
    const T = x.shape[0];
    const s = sigmoid(linear(x, this.weight.value.to("float32")));
    let choice = add(s, this.e_score_correction_bias.value);
    if (topkGroup < G) {
      const groupScores = sum(topk(choice.view(T, G, E / G), 2).values, -1);
      const kept = topk(groupScores, topkGroup).indices;
      const groupMask = sum(eq(kept.unsqueeze(-1), arange(0, G, 1, { device: x.device })), 1); // [T, G], 1 = kept
      const expertMask = groupMask.unsqueeze(-1).expand(T, G, E / G).reshape(T, E);
      choice = where(eq(expertMask, 0), -Infinity, choice);
    }
    const indices = topk(choice, topK).indices;
    // s at the chosen experts (torch.gather) as a one-hot contraction.
    let weights = sum(mul(eq(indices.unsqueeze(-1), arange(0, E, 1, { device: x.device })), s.unsqueeze(1)), -1);
    if (this.o.normTopkProb) weights = div(weights, add(sum(weights, -1, true), 1e-20));
    return { weights: mul(weights, this.o.routedScalingFactor), indices };
  }
}

/** `gate` (GroupLimitedRouter), `experts.N` and `shared_experts` (gated MLPs). forward: [B, L, hidden] -> [B, L, hidden]. */
export class GroupLimitedMoe extends Module implements KernelMoeBlock {
  readonly gate: GroupLimitedRouter;
  readonly experts: ModuleList<GatedMLP>;
  readonly shared_experts: GatedMLP;
  private readonly act: Activation;
  private stacked?: { gateUp: Tensor; down: Tensor };

  constructor(private readonly o: GroupLimitedMoeOptions) {
    super();
    this.gate = this.module("gate", new GroupLimitedRouter(o));
    this.experts = this.module("experts", new ModuleList(Array.from({ length: o.numExperts }, () => new GatedMLP(o.hiddenSize, o.expertIntermediateSize, o.hiddenAct))));
    this.shared_experts = this.module("shared_experts", new GatedMLP(o.hiddenSize, o.sharedIntermediateSize, o.hiddenAct));
    this.act = activation(o.hiddenAct);
  }

  forward(x: Tensor): Tensor {
    return tidy(() => {
      const [B, L, H] = x.shape, T = B * L, k = this.o.topK;
      const flat = x.reshape(T, H);
      const { weights, indices } = this.gate.forward(flat);
      if (this.act === silu) {
        const { gateUp, down } = this.stackedExperts();
        return add(moeExperts(flat, gateUp, down, weights, indices).view(B, L, H), this.shared_experts.forward(x));
      }
      const rows = flat.unsqueeze(1).expand(T, k, H).reshape(T * k, H);
      const idx = indices.reshape(T * k);
      const w = (pick: (e: GatedMLP) => Linear) => this.experts.items.map((e) => pick(e).weight.value);
      const h = mul(this.act(gatherLinear(rows, w((e) => e.gate_proj), idx)), gatherLinear(rows, w((e) => e.up_proj), idx));
      const routed = sum(mul(gatherLinear(h, w((e) => e.down_proj), idx).view(T, k, H), weights.unsqueeze(2)), 1).view(B, L, H);
      return add(routed, this.shared_experts.forward(x));
    });
  }

  /** The routed experts' weights stacked once (see nn/moe.ts stackExperts): gate_up [E, 2I, H], down [E, H, I]. */
  private stackedExperts(): { gateUp: Tensor; down: Tensor } {
    return (this.stacked = stackExperts(this.experts.items.map((e) => ({ gate: e.gate_proj, up: e.up_proj, down: e.down_proj })), this.stacked));
  }

  kernelMoe(): KernelMoeParts | string {
    if (this.o.hiddenAct !== "silu") return `its experts' activation is ${this.o.hiddenAct}; the MoE kernel contract is silu`;
    return {
      route: (flat) => this.gate.forward(flat),
      experts: () => this.stackedExperts(),
      finish: (flat, routed) => add(routed, this.shared_experts.forward(flat)),
    };
  }
}
useKernelForwardFromHub("MoE")(GroupLimitedMoe);
