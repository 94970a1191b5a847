/**
 * Basic layers (torch.nn): Linear, Embedding, RMSNorm, LayerNorm. Parameter names and shapes
 * equal PyTorch's, so Hugging Face checkpoints load into them directly. Activations are float32;
 * weights stay in the dtype they were loaded in (float32, float16 or bfloat16).
 */
import { embedding, layerNorm, linear, linearQuantized, rmsNorm } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";
import { useKernelForwardFromHub } from "./kernel_hub.js";
import { Module, type Parameter } from "./module.js";

/** The block-quantized form of a Linear weight (see nn/quantized.ts). */
export interface LinearQuantizedWeight {
  readonly bits: 4 | 8;
  readonly q: Tensor;
  readonly scales: Tensor;
}

/**
 * A Linear weight in a pre-quantized Hub format (nn/hub_quantized.ts): the checkpoint tensors it
 * loads in place of `weight`, and the product with them.
 */
export interface HubQuantizedWeight {
  /** The format, e.g. "gptq", for messages. */
  readonly method: string;
  /** Parameters named as the checkpoint's tensors beside the layer's bias (e.g. qweight, scales). */
  readonly params: Record<string, Parameter>;
  /** x [..., in] @ W^T + bias -> float32 [..., out]. */
  forward(x: Tensor, bias: Tensor | null): Tensor;
}

/**
 * y = x W^T + b; weight [out, in], bias [out] (torch.nn.Linear). When `quantized` is set
 * (nn/quantized.ts quantizeLinears), forward uses it instead of the float weight; after
 * `useHubWeight`, the layer loads and uses a pre-quantized Hub weight instead of `weight`.
 */
export class Linear extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;
  private quantizedWeight: LinearQuantizedWeight | null = null;
  hub: HubQuantizedWeight | null = null;
  constructor(readonly inFeatures: number, readonly outFeatures: number, bias = true) {
    super();
    this.weight = this.param("weight", [outFeatures, inFeatures]);
    this.bias = bias ? this.param("bias", [outFeatures]) : null;
  }
  /** The block-quantized weight forward uses in place of `weight`, if set (nn/quantized.ts). */
  get quantized(): LinearQuantizedWeight | null {
    return this.quantizedWeight;
  }
  set quantized(w: LinearQuantizedWeight | null) {
    this.quantizedWeight = w;
    this.changed();
  }
  protected override computedWith(): [string, Tensor][] {
    const q = this.quantizedWeight;
    return q ? [["quantized.q", q.q], ["quantized.scales", q.scales]] : [];
  }
  /** Forget the float weight once `quantized` replaces it on another device (nn/quantized.ts). */
  dropWeight(): void {
    this.replaceParam("weight", {});
  }
  /** Load `w`'s parameters instead of `weight` (call before loading the checkpoint). */
  useHubWeight(w: HubQuantizedWeight): void {
    this.replaceParam("weight", w.params);
    this.hub = w;
  }
  forward(x: Tensor): Tensor {
    if (this.hub) return this.hub.forward(x, this.bias?.value ?? null);
    const q = this.quantized;
    if (q) return linearQuantized(x, q.q, q.scales, q.bits, this.bias?.value ?? null);
    return linear(x, this.weight.value, this.bias?.value ?? null);
  }
}

/** A Linear computing with its own float weight (no quantized or Hub weight, forward not replaced). */
export function isPlainFloat(l: Linear): boolean {
  return !l.quantized && !l.hub && l.forward === Linear.prototype.forward;
}

/** A Linear computing with its block-quantized weight (nn/quantized.ts; no Hub weight, forward not replaced). */
export function isPlainQuantized(l: Linear): boolean {
  return !!l.quantized && !l.hub && l.forward === Linear.prototype.forward;
}

/** Lookup table [num, dim] (torch.nn.Embedding); forward(ids) -> float32 [...ids, dim]. */
export class Embedding extends Module {
  readonly weight: Parameter;
  constructor(readonly num: number, readonly dim: number) {
    super();
    this.weight = this.param("weight", [num, dim]);
  }
  forward(ids: Tensor): Tensor {
    return embedding(ids, this.weight.value);
  }
}

/**
 * RMSNorm: x / sqrt(mean(x^2) + eps) * (offset + weight). offset 0 is Llama's LlamaRMSNorm;
 * offset 1 is Gemma's GemmaRMSNorm (weight stored as a delta from 1).
 */
export class RMSNorm extends Module {
  readonly weight: Parameter;
  constructor(readonly dim: number, readonly eps: number, readonly offset = 0) {
    super();
    this.weight = this.param("weight", [dim]);
  }
  forward(x: Tensor): Tensor {
    return rmsNorm(x, this.weight.value, this.eps, this.offset);
  }
}
useKernelForwardFromHub("RMSNorm")(RMSNorm);

/** LayerNorm with weight and bias (torch.nn.LayerNorm with elementwise_affine). */
export class LayerNorm extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(readonly dim: number, readonly eps: number) {
    super();
    this.weight = this.param("weight", [dim]);
    this.bias = this.param("bias", [dim]);
  }
  forward(x: Tensor): Tensor {
    return layerNorm(x, this.weight.value, this.bias.value, this.eps);
  }
}
