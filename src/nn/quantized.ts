/**
 * Weight-only block quantization of nn.Linear layers, as llama.cpp's q8_0 ("int8") and q4_0
 * ("int4"): symmetric scales per block of 32 along the input dimension, stored as float32.
 * Activations stay float32; the weight is decoded inside the kernel (tensor/ops.ts linearQuantized).
 */
import type { Device, WeightArena } from "../devices/device.js";
import { linearQuantizedGroup, quantizeBlocks } from "../tensor/ops.js";
import type { Tensor } from "../tensor/tensor.js";
import { Linear } from "./layers.js";
import type { Module } from "./module.js";

/** The weight formats `--dtype` accepts besides the float dtypes. */
export type WeightQuantization = "int8" | "int4";

/** Bits per code of each format. */
export const QUANT_BITS: Record<WeightQuantization, 4 | 8> = { int8: 8, int4: 4 };

/** Whether `s` names a weight quantization ("int8" or "int4"). */
export function isWeightQuantization(s: unknown): s is WeightQuantization {
  return s === "int8" || s === "int4";
}

/**
 * A block-quantized weight [N, K]: q int32 [N, K * bits / 32] (packed codes, see
 * KernelSignatures.quantizeBlocks) and scales float32 [N, K / 32].
 */
export class QuantizedWeight {
  constructor(readonly bits: 4 | 8, readonly q: Tensor, readonly scales: Tensor) {}

  /**
   * Quantize a float weight [N, K] (K a multiple of 32; RangeError otherwise), into `arena` (one
   * of w's device) when given.
   */
  static quantize(w: Tensor, bits: 4 | 8, arena?: WeightArena): QuantizedWeight {
    const { q, scales } = quantizeBlocks(w, bits, arena);
    return new QuantizedWeight(bits, q, scales);
  }

  /** The same weight on `device`. */
  to(device: Device): QuantizedWeight {
    return new QuantizedWeight(this.bits, this.q.to(device), this.scales.to(device));
  }
}

/**
 * Quantize the weight of every Linear under `root` whose input size is a multiple of 32 (the
 * others stay float, as do embeddings, norms and biases). With `device` (the weights being on cpu,
 * where quantizeBlocks runs), the quantized weights are placed there and the layers drop their float
 * weight, so that moving the model afterwards does not copy it. Weights that stay on the device
 * they are quantized on share one weight arena there (Device.weightArena; on cpu, huge pages for
 * the decode GEMVs to stream), freed with the last of them. Returns how many layers were
 * quantized and the names of those left float.
 */
export function quantizeLinears(root: Module, format: WeightQuantization, device?: Device): { quantized: number; skipped: string[] } {
  let quantized = 0;
  const skipped: string[] = [];
  const arenas = new Map<Device, WeightArena | undefined>();
  for (const [name, m] of root.namedModules()) {
    if (!(m instanceof Linear)) continue;
    if (m.inFeatures % 32 !== 0) skipped.push(name);
    else {
      const from = m.weight.value.device;
      if (!arenas.has(from)) arenas.set(from, !device || device === from ? from.weightArena?.() : undefined);
      const w = QuantizedWeight.quantize(m.weight.value, QUANT_BITS[format], arenas.get(from));
      m.quantized = device && device !== w.q.device ? w.to(device) : w;
      if (m.quantized !== w) m.dropWeight();
      quantized++;
    }
  }
  return { quantized, skipped };
}

const plainLinearForward = Linear.prototype.forward;

/**
 * `linears.map((l) => l.forward(x))`, for linears that read the same input (attention's q/k/v,
 * a gated MLP's gate/up). When every one is a plain block-quantized Linear (quantizeLinears; no Hub
 * weight, forward not replaced) they run as one linearQuantizedGroup: the input quantized once, one
 * kernel call (a decode step's serial time is mostly per-call overhead).
 */
export function forwardLinears(x: Tensor, linears: readonly Linear[]): Tensor[] {
  const plain = linears.every((l) => l.quantized && !l.hub && l.forward === plainLinearForward);
  if (!plain) return linears.map((l) => l.forward(x));
  return linearQuantizedGroup(x, linears.map((l) => ({ ...l.quantized!, bias: l.bias?.value ?? null })));
}
