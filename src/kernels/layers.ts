/**
 * tsorch's contract for each swappable layer name: which module it applies to, which op signature a
 * kernel's `layers` entry must implement, and how the module's forward calls it.
 *   RMSNorm     op(x [..., H] f32, weight [H], eps, offset) -> [..., H] f32   (nn RMSNorm)
 *   SiluAndMul  op(gate [..., D] f32, up [..., D] f32) -> silu(gate) * up    (nn SiluAndMul)
 *   MoE         op(x [T, H] f32, topk_weights [T, K] f32, topk_ids [T, K] int32,
 *                  gate_up [E, 2I, H], down [E, H, I]) -> [T, H] f32           (a KernelMoeBlock, silu)
 *               gate_up stacks each expert's gate (rows 0..I) and up (rows I..2I) projection; routing
 *               and what follows the routed sum (shared experts) stay the block's own.
 */
import type { Module } from "../nn/module.js";
import { RMSNorm } from "../nn/layers.js";
import { SiluAndMul } from "../nn/mlp.js";
import type { KernelMoeBlock } from "../nn/kernel_hub.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import type { Kernel } from "./kernel.js";

/** A replacement forward for `m` calling `op` of `kernel`, or a reason it cannot apply. */
export type LayerBinder = (m: Module, kernel: Kernel, op: string) => ((...args: Tensor[]) => Tensor) | string;

export const LAYER_CONTRACTS: Record<string, LayerBinder> = {
  RMSNorm: (m, kernel, op) => {
    if (!(m instanceof RMSNorm)) return "not an RMSNorm module";
    return (x) => kernel.call(op, [x, m.weight.value, m.eps, m.offset]);
  },
  SiluAndMul: (m, kernel, op) => {
    if (!(m instanceof SiluAndMul)) return "not a SiluAndMul module";
    return (gate, up) => kernel.call(op, [gate, up]);
  },
  MoE: (m, kernel, op) => {
    if (!("kernelMoe" in m)) return "not a mixture-of-experts block";
    const parts = (m as KernelMoeBlock).kernelMoe();
    if (typeof parts === "string") return parts;
    return (x) => tidy(() => {
      const { gateUp, down } = parts.experts();
      const [B, L, H] = x.shape, flat = x.reshape(B * L, H);
      const { weights, indices } = parts.route(flat);
      return parts.finish(flat, kernel.call(op, [flat, weights, indices.to("int32"), gateUp, down])).view(B, L, H);
    });
  },
};
