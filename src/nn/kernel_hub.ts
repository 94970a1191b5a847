/**
 * Swappable forwards (the `kernels` library's use_kernel_forward_from_hub): a layer class marked
 * `useKernelForwardFromHub("RMSNorm")` tells kernels/kernelize that its forward may be replaced by
 * a hub kernel implementing tsorch's contract for that layer name. Marking changes nothing else.
 */
import type { Tensor } from "../tensor/tensor.js";
import type { Module } from "./module.js";

const LAYER_NAME = new WeakMap<Function, string>();

/** Mark layer class `cls` as having the swappable forward `name`; returns `cls`. */
export function useKernelForwardFromHub(name: string): <C extends Function>(cls: C) => C {
  return (cls) => {
    LAYER_NAME.set(cls, name);
    return cls;
  };
}

/** The kernel layer name `m`'s class declares, if any. */
export function kernelLayerName(m: Module): string | undefined {
  return LAYER_NAME.get(m.constructor);
}

/**
 * What a mixture-of-experts block marked `useKernelForwardFromHub("MoE")` hands a MoE kernel
 * (kernels/layers.ts): the kernel computes sum_k w_k * down_e(silu(gate_e(x)) * up_e(x)) over each
 * row's routed experts; the block keeps its own routing and what follows the routed sum.
 */
export interface KernelMoeParts {
  /** Rows [T, H] -> routing weights float32 [T, k] (any scaling included) and expert ids int64 [T, k]. */
  route(flat: Tensor): { weights: Tensor; indices: Tensor };
  /** gate_up [E, 2I, H] (expert e's gate rows 0..I, up rows I..2I) and down [E, H, I], as loaded. */
  experts(): { gateUp: Tensor; down: Tensor };
  /** The block's output rows [T, H] from its input rows and the routed sum (e.g. + shared experts). */
  finish(flat: Tensor, routed: Tensor): Tensor;
}

/** A block marked "MoE": its parts for a kernel, or why a silu-gated grouped kernel cannot stand in for its experts. */
export interface KernelMoeBlock extends Module {
  kernelMoe(): KernelMoeParts | string;
}
