/**
 * What a batch-1 decode step reads: each Linear's weight bytes, and the step's GEMV calls in order
 * as a compiled step makes them (for the bench's bandwidth limit and its step-read probe).
 */
import { Linear } from "../src/nn/layers.js";
import type { Module } from "../src/nn/module.js";
import { itemsize } from "../src/tensor/dtype.js";

/** Bytes of one Linear's weight a decode step reads (quantized codes and scales, or the float weight). */
export function linearWeightBytes(m: Linear): number {
  const ts = m.quantized ? [m.quantized.q, m.quantized.scales] : [m.weight.value];
  return ts.reduce((bytes, t) => bytes + t.numel * itemsize(t.dtype), 0);
}

/** A Linear of a MoE block's routed experts (`...experts.<e>.<proj>`; shared experts are not). */
const EXPERT = /^(.*(?:^|\.)experts)\.(\d+)\./;

/**
 * The weight bytes one batch-1 decode token reads: every Linear's, except that a MoE block's
 * routed experts count k / E of their bytes (k = config num_experts_per_tok, E the block's
 * experts: a token reads its k routed experts). Null where that is not known: a MoE model without
 * num_experts_per_tok, or MoE blocks whose experts are no Linears (gpt-oss's packed MXFP4).
 */
export function decodeWeightBytesPerToken(model: Module & { config?: Record<string, unknown> }, linears: [string, Linear][]): number | null {
  const blocks = new Map<string, { bytes: number; experts: Set<string> }>();
  let bytes = 0;
  for (const [name, m] of linears) {
    const e = EXPERT.exec(name);
    if (!e) {
      bytes += linearWeightBytes(m);
      continue;
    }
    const b = blocks.get(e[1]) ?? { bytes: 0, experts: new Set<string>() };
    b.bytes += linearWeightBytes(m);
    b.experts.add(e[2]);
    blocks.set(e[1], b);
  }
  const moeModules = [...model.namedModules()].filter(([, m]) => typeof (m as { kernelMoe?: unknown }).kernelMoe === "function");
  if (moeModules.some(([path]) => ![...blocks.keys()].some((b) => b.startsWith(`${path}.`)))) return null;
  if (blocks.size === 0) return bytes;
  const config = model.config ?? {};
  const k = (config.num_experts_per_tok ?? (config.text_config as Record<string, unknown> | undefined)?.num_experts_per_tok) as number | undefined;
  if (typeof k !== "number" || !(k > 0)) return null;
  for (const b of blocks.values()) bytes += (b.bytes * Math.min(k, b.experts.size)) / b.experts.size;
  return bytes;
}

// Linears of one layer that a compiled decode step runs as one call (the compile pass groups
// adjacent linears that read one input, have no bias and one weight kind, at most three:
// src/compile/passes/linear_group.ts): q/k/v and gate/up, by the Hugging Face names of the
// Llama-family layers the bench models have.
const GROUPED_LINEARS = [["q_proj", "k_proj", "v_proj"], ["gate_proj", "up_proj"]];

/**
 * The model's Linears with their module paths, in module order (a decoder layer's q, k, v, o,
 * gate, up, down, ..., then the LM head).
 */
export function namedLinears(model: Module): [string, Linear][] {
  return [...model.namedModules()].filter((e): e is [string, Linear] => e[1] instanceof Linear);
}

/**
 * The weight bytes of each GEMV call of a compiled batch-1 decode step of a dense model, in order:
 * the Linears in module order, consecutive ones of one GROUPED_LINEARS set under one parent module
 * summed where the compile pass would group them (no bias, the same weight kind: float dtype or
 * quantized bits), every other Linear a call of its own. Null where a step's calls are not its
 * Linears one by one: Hub-format weights (their own kernels) or MoE experts (a step reads only
 * the routed ones, in one call).
 */
export function decodeStepCallBytes(linears: [string, Linear][]): number[] | null {
  if (linears.some(([name, m]) => m.hub || EXPERT.test(name))) return null;
  const calls: number[] = [];
  let lastKey = "";
  for (const [name, m] of linears) {
    const dot = name.lastIndexOf("."), parent = name.slice(0, dot), leaf = name.slice(dot + 1);
    const group = GROUPED_LINEARS.findIndex((g) => g.includes(leaf));
    const kind = m.quantized ? `q${m.quantized.bits}` : m.weight.value.dtype;
    const key = group >= 0 && m.bias === null ? `${parent}#${group}#${kind}` : "";
    if (key && key === lastKey) calls[calls.length - 1] += linearWeightBytes(m);
    else calls.push(linearWeightBytes(m));
    lastKey = key;
  }
  return calls;
}
