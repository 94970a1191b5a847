/** Gated feed-forward block down(act(gate(x)) * up(x)) (LlamaMLP and its many relatives). */
import { mul } from "../tensor/ops.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { activation, type Activation } from "./activations.js";
import { Linear } from "./layers.js";
import { Module } from "./module.js";

export class GatedMLP extends Module {
  readonly gate_proj: Linear;
  readonly up_proj: Linear;
  readonly down_proj: Linear;
  private readonly act: Activation;
  constructor(hidden: number, intermediate: number, hiddenAct: string, bias = false) {
    super();
    this.gate_proj = this.module("gate_proj", new Linear(hidden, intermediate, bias));
    this.up_proj = this.module("up_proj", new Linear(hidden, intermediate, bias));
    this.down_proj = this.module("down_proj", new Linear(intermediate, hidden, bias));
    this.act = activation(hiddenAct);
  }
  forward(x: Tensor): Tensor {
    return tidy(() => this.down_proj.forward(mul(this.act(this.gate_proj.forward(x)), this.up_proj.forward(x))));
  }
}
