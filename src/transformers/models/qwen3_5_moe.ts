/**
 * Qwen3.5-MoE (transformers' models/qwen3_5_moe/modeling_qwen3_5_moe.py: Qwen3_5MoeForCausalLM,
 * Qwen3_5MoeForConditionalGeneration + Qwen3_5MoeTextConfig): Qwen3.5's hybrid network (Gated
 * DeltaNet and gated full attention, models/qwen3_5.ts) with a sparse mixture-of-experts block as
 * every layer's `mlp`:
 *
 *   mlp(x) = sum_top-k w_e * expert_e(x) + sigmoid(shared_expert_gate(x)) * shared_expert(x)
 *
 * Router `gate.weight` [E, H]: softmax over all experts (float32), top-k, renormalised to sum 1.
 * Experts are read fused, `experts.gate_up_proj` [E, 2I, H] and `experts.down_proj` [E, H, I], as
 * Qwen's files hold them; split `experts.N.{gate,up,down}_proj.weight` (transformers'
 * save_pretrained) are fused at load (checkpoint_layout.ts).
 */
import { FusedExperts } from "../../nn/fused_experts.js";
import { Linear } from "../../nn/layers.js";
import { useKernelForwardFromHub, type KernelMoeBlock, type KernelMoeParts } from "../../nn/kernel_hub.js";
import { GatedMLP } from "../../nn/mlp.js";
import { Module, type Parameter } from "../../nn/module.js";
import { routeTopK } from "../../nn/moe.js";
import { add, linear, mul, sigmoid } from "../../tensor/ops.js";
import { tidy } from "../../tensor/scope.js";
import type { Tensor } from "../../tensor/tensor.js";
import { LANGUAGE_MODEL_RENAME, wrappedTextConfig, type CheckpointLayout } from "../checkpoint_layout.js";
import { num, type RawConfig } from "../configuration.js";
import { Qwen3_5ForCausalLM, Qwen3_5TextConfig } from "./qwen3_5.js";

// ------------------------------------------------------------------ config

/** Qwen3_5MoeTextConfig: Qwen3.5's text fields plus the expert fields, with transformers' defaults. */
export class Qwen3_5MoeTextConfig extends Qwen3_5TextConfig {
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  readonly sharedExpertIntermediateSize: number;

  constructor(raw: RawConfig) {
    super({ vocab_size: 248320, hidden_size: 2048, num_hidden_layers: 40, num_key_value_heads: 2, ...raw });
    this.numExperts = num(raw, "num_experts", 256);
    this.numExpertsPerTok = num(raw, "num_experts_per_tok", 8);
    this.moeIntermediateSize = num(raw, "moe_intermediate_size", 512);
    this.sharedExpertIntermediateSize = num(raw, "shared_expert_intermediate_size", 512);
  }
}

// ------------------------------------------------------------------ layers

/** The router of Qwen3_5MoeSparseMoeBlock (Qwen3_5MoeTopKRouter): a bare weight [E, H]. */
class TopKRouter extends Module {
  readonly weight: Parameter;
  constructor(numExperts: number, hidden: number) {
    super();
    this.weight = this.param("weight", [numExperts, hidden]);
  }
}

/** Qwen3_5MoeSparseMoeBlock: x [B, L, H] -> float32 [B, L, H]. */
export class Qwen3_5MoeSparseMoeBlock extends Module implements KernelMoeBlock {
  readonly gate: TopKRouter;
  readonly experts: FusedExperts;
  readonly shared_expert: GatedMLP;
  readonly shared_expert_gate: Linear;

  constructor(private readonly c: Qwen3_5MoeTextConfig) {
    super();
    const h = c.hiddenSize;
    this.gate = this.module("gate", new TopKRouter(c.numExperts, h));
    this.experts = this.module("experts", new FusedExperts(c.numExperts, h, c.moeIntermediateSize, c.hiddenAct));
    this.shared_expert = this.module("shared_expert", new GatedMLP(h, c.sharedExpertIntermediateSize, c.hiddenAct));
    this.shared_expert_gate = this.module("shared_expert_gate", new Linear(h, 1, false));
  }

  forward(x: Tensor): Tensor {
    return tidy(() => {
      const [B, L, H] = x.shape;
      const flat = x.reshape(B * L, H);
      const { weights, indices } = this.route(flat);
      return this.finish(flat, this.experts.forward(flat, weights, indices)).view(B, L, H);
    });
  }

  private route(flat: Tensor): { weights: Tensor; indices: Tensor } {
    return routeTopK(linear(flat, this.gate.weight.value), this.c.numExpertsPerTok, true);
  }

  /** Routed sum [T, H] plus the sigmoid-gated shared expert of `flat` [T, H]. */
  private finish(flat: Tensor, routed: Tensor): Tensor {
    return add(routed, mul(sigmoid(this.shared_expert_gate.forward(flat)), this.shared_expert.forward(flat)));
  }

  kernelMoe(): KernelMoeParts | string {
    if (this.c.hiddenAct !== "silu") return `its experts' activation is ${this.c.hiddenAct}; the MoE kernel contract is silu`;
    return {
      route: (flat) => this.route(flat),
      experts: () => ({ gateUp: this.experts.gate_up_proj.value, down: this.experts.down_proj.value }),
      finish: (flat, routed) => this.finish(flat, routed),
    };
  }
}
useKernelForwardFromHub("MoE")(Qwen3_5MoeSparseMoeBlock);

// ------------------------------------------------------------------ causal LM

/** Qwen3_5MoeForCausalLM (model_type qwen3_5_moe_text): the text model with `model.*` weights. */
export class Qwen3_5MoeForCausalLM extends Qwen3_5ForCausalLM {
  constructor(raw: RawConfig, c = new Qwen3_5MoeTextConfig(raw)) {
    super(raw, c, () => new Qwen3_5MoeSparseMoeBlock(c));
  }
  protected override checkpointLayout(): CheckpointLayout {
    return { skip: ["mtp."], fuseExperts: true };
  }
}

/**
 * Qwen3_5MoeForConditionalGeneration, as Qwen/Qwen3.5-*-A*B ship it, run for text generation: the
 * text config is `text_config`, the language model's weights come from `model.language_model.*`,
 * `lm_head` stays at the root; `model.visual.*` and `mtp.*` are skipped knowingly.
 */
export class Qwen3_5MoeForConditionalGeneration extends Qwen3_5MoeForCausalLM {
  constructor(raw: RawConfig) {
    super(wrappedTextConfig(raw));
  }
  protected override checkpointLayout(): CheckpointLayout {
    return { renames: [LANGUAGE_MODEL_RENAME], skip: ["model.visual.", "mtp."], fuseExperts: true };
  }
}
