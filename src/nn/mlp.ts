/** Gated feed-forward block down(act(gate(x)) * up(x)) (LlamaMLP and its many relatives). */
import { mul, silu } from "../tensor/ops.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { activation, type Activation } from "./activations.js";
import { Linear } from "./layers.js";
import { useKernelForwardFromHub } from "./kernel_hub.js";
import { Module } from "./module.js";
import { forwardLinears } from "./quantized.js";

/** silu(gate) * up, elementwise (the swappable forward "SiluAndMul"); float32 in and out. */
export class SiluAndMul extends Module {
  forward(gate: Tensor, up: Tensor): Tensor {
    return mul(silu(gate), up);
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
}
