/** Gated feed-forward block down(act(gate(x)) * up(x)) (LlamaMLP and its many relatives). */
import { gatedMlpResidual, siluMul } from "../tensor/fused.js";
import { add, mul } from "../tensor/ops.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { activation, type Activation } from "./activations.js";
import { gatedMlpResidualQuantized } from "../tensor/fused_quantized.js";
import { isPlainFloat, isPlainQuantized, Linear, RMSNorm } from "./layers.js";
import { useKernelForwardFromHub } from "./kernel_hub.js";
import { Module } from "./module.js";
import { forwardLinears } from "./quantized.js";

/** silu(gate) * up, elementwise (the swappable forward "SiluAndMul"); float32 in and out, one pass (tensor/fused.ts). */
export class SiluAndMul extends Module {
  forward(gate: Tensor, up: Tensor): Tensor {
    return siluMul(gate, up);
  }
}
useKernelForwardFromHub("SiluAndMul")(SiluAndMul);

export class GatedMLP extends Module {
  readonly gate_proj: Linear;
  readonly up_proj: Linear;
  readonly down_proj: Linear;
  private readonly act: Activation;
  /** The activation and product as a swappable layer, when the activation is silu. */
  readonly siluAndMul: SiluAndMul | null;
  constructor(hidden: number, intermediate: number, hiddenAct: string, bias = false) {
    super();
    this.gate_proj = this.module("gate_proj", new Linear(hidden, intermediate, bias));
    this.up_proj = this.module("up_proj", new Linear(hidden, intermediate, bias));
    this.down_proj = this.module("down_proj", new Linear(intermediate, hidden, bias));
    this.act = activation(hiddenAct);
    this.siluAndMul = hiddenAct === "silu" ? this.module("act_fn", new SiluAndMul()) : null;
  }
  forward(x: Tensor): Tensor {
    return tidy(() => {
      const [gate, up] = forwardLinears(x, [this.gate_proj, this.up_proj]);
      return this.down_proj.forward(this.siluAndMul ? this.siluAndMul.forward(gate, up) : mul(this.act(gate), up));
    });
  }

  /**
   * residual + forward(norm.forward(x)) (the MLP half of a pre-norm decoder layer). With float
   * weights, no gate/up bias, SiLU, and none of the modules' forwards replaced (kernelize, a Hub
   * weight), the whole block is one fused op (tensor/fused.ts gatedMlpResidual: the norm, gate/up,
   * SiLU(gate) * up, down and the residual add in one or two kernel calls where the device has them);
   * with block-quantized weights (gate/up of one bit width) tensor/fused_quantized.ts's form.
   */
  forwardResidual(x: Tensor, norm: Module & { forward(x: Tensor): Tensor }, residual: Tensor): Tensor {
    return tidy(() => {
      const linears = [this.gate_proj, this.up_proj, this.down_proj];
      const plain = this.forward === GatedMLP.prototype.forward && this.siluAndMul?.forward === SiluAndMul.prototype.forward && !this.gate_proj.bias && !this.up_proj.bias
        && norm instanceof RMSNorm && norm.forward === RMSNorm.prototype.forward;
      if (!plain) return add(residual, this.forward(norm.forward(x)));
      const n = { weight: norm.weight.value, eps: norm.eps, offset: norm.offset }, bias = this.down_proj.bias?.value ?? null;
      if (linears.every(isPlainFloat)) {
        return gatedMlpResidual(x, n, this.gate_proj.weight.value, this.up_proj.weight.value, this.down_proj.weight.value, bias, residual);
      }
      const [g, u, d] = linears.map((l) => l.quantized);
      if (linears.every(isPlainQuantized) && g!.bits === u!.bits) return gatedMlpResidualQuantized(x, n, g!, u!, d!, bias, residual);
      return add(residual, this.forward(norm.forward(x)));
    });
  }
}
