/**
 * config.json's quantization_config for the pre-quantized Hub formats tsorch loads as they are:
 * GPTQ (bits 4 or 8, any group size, act-order via g_idx, checkpoint_format gptq / gptq_v2), AWQ
 * (bits 4, version gemm, zero points) and FP8 block-scaled (e4m3, weight_block_size, dynamic
 * activations: tsorch keeps activations in float32, as transformers does on cpu). `prepareHubWeights`
 * switches every Linear whose packed tensors the checkpoint holds to that format before loading;
 * the others (lm_head, modules_to_not_convert, layers the tool could not pack) load as float.
 */
import type { RawTensor } from "../hub/index.js";
import { Fp8BlockWeight, PackedIntWeight } from "../nn/hub_quantized.js";
import { Linear } from "../nn/layers.js";
import type { Module } from "../nn/module.js";
import { ConfigError, type RawConfig } from "./configuration.js";
import { WeightLoadError } from "./modeling_utils.js";

/** A pre-quantized format from quantization_config. groupSize -1: one group over all inputs. */
export type HubQuantization =
  | { method: "gptq"; bits: 4 | 8; groupSize: number; zeroOffset: 0 | 1 }
  | { method: "awq"; bits: 4; groupSize: number }
  | { method: "fp8"; block: [number, number] };

const SUPPORTED = "gptq (bits 4 or 8, checkpoint_format gptq or gptq_v2), awq (bits 4, version gemm, zero_point), fp8 (fmt e4m3, weight_block_size, activation_scheme dynamic), mxfp4 (gpt-oss experts)";

/**
 * The format config.json declares, or null without quantization_config (or for mxfp4, which the
 * gpt-oss model reads itself). Throws ConfigError naming the field and what is supported for any
 * other method or an unsupported bits / version / format / block size.
 */
export function hubQuantization(raw: RawConfig): HubQuantization | null {
  const q = raw.quantization_config as RawConfig | undefined | null;
  if (!q || q.quant_method === "mxfp4") return null;
  const fail = (what: string) => new ConfigError(`config.json quantization_config: ${what} is not supported (supported: ${SUPPORTED})`);
  const groupSize = (): number => {
    const g = q.group_size ?? 128;
    if (g !== -1 && !(Number.isInteger(g) && (g as number) > 0)) throw fail(`group_size ${JSON.stringify(g)}`);
    return g as number;
  };
  switch (q.quant_method) {
    case "gptq": {
      if (q.bits !== 4 && q.bits !== 8) throw fail(`gptq bits ${JSON.stringify(q.bits)}`);
      const format = String(q.checkpoint_format ?? q.format ?? "gptq").toLowerCase();
      if (format !== "gptq" && format !== "gptq_v2") throw fail(`gptq checkpoint_format ${JSON.stringify(format)}`);
      return { method: "gptq", bits: q.bits, groupSize: groupSize(), zeroOffset: format === "gptq" ? 1 : 0 };
    }
    case "awq": {
      if (q.bits !== 4 && q.w_bit !== 4) throw fail(`awq bits ${JSON.stringify(q.bits ?? q.w_bit)}`);
      const version = String(q.version ?? "gemm").toLowerCase();
      if (version !== "gemm") throw fail(`awq version ${JSON.stringify(q.version)}`);
      if (q.zero_point === false) throw fail("awq zero_point false");
      return { method: "awq", bits: 4, groupSize: (q.q_group_size as number | undefined) ?? groupSize() };
    }
    case "fp8": {
      if (q.fmt !== undefined && q.fmt !== "e4m3") throw fail(`fp8 fmt ${JSON.stringify(q.fmt)}`);
      if (q.activation_scheme !== undefined && q.activation_scheme !== "dynamic") throw fail(`fp8 activation_scheme ${JSON.stringify(q.activation_scheme)}`);
      const b = q.weight_block_size;
      if (!Array.isArray(b) || b.length !== 2 || !b.every((d) => Number.isInteger(d) && d > 0)) throw fail(`fp8 weight_block_size ${JSON.stringify(b)} (per-tensor FP8)`);
      return { method: "fp8", block: [b[0], b[1]] };
    }
    default:
      throw fail(`quant_method ${JSON.stringify(q.quant_method)}`);
  }
}

/**
 * Switch every Linear under `model` whose packed tensors `weights` holds to `quant`, and return the
 * weights as the layers load them: FP8 bytes as int32 words [N, K / 4]; AWQ (and GPTQ without one)
 * given g_idx = k // group_size. Throws WeightLoadError naming the layer when its shape cannot hold
 * the format (inputs or outputs not a multiple of the codes per word, FP8 inputs not a multiple of 4).
 */
export function prepareHubWeights(model: Module, quant: HubQuantization, weights: Map<string, RawTensor>): Map<string, RawTensor> {
  const out = new Map(weights);
  for (const [name, m] of model.namedModules()) {
    if (!(m instanceof Linear)) continue;
    const K = m.inFeatures, N = m.outFeatures;
    if (quant.method === "fp8") {
      const w = weights.get(`${name}.weight`);
      if (w?.dtype !== "float8_e4m3fn") continue;
      if (K % 4) throw new WeightLoadError(`FP8 weight '${name}.weight' [${w.shape}]: tsorch needs the input size (${K}) to be a multiple of 4`);
      const aligned = w.bytes.byteOffset % 4 === 0 ? w.bytes : w.bytes.slice();
      out.set(w.name, { name: w.name, dtype: "int32", shape: [w.shape[0], w.shape[1] / 4], bytes: aligned });
      m.useHubWeight(new Fp8BlockWeight(quant.block, K, N));
      continue;
    }
    if (!weights.has(`${name}.qweight`)) continue;
    const P = 32 / quant.bits, g = quant.groupSize === -1 ? K : quant.groupSize;
    if (N % P || (quant.method === "gptq" && K % P)) {
      throw new WeightLoadError(`${quant.method} layer '${name}' [${N}, ${K}]: outputs${quant.method === "gptq" ? " and inputs" : ""} must be multiples of ${P} (codes per int32 word)`);
    }
    const gKey = `${name}.g_idx`;
    if (quant.method === "awq" || !weights.has(gKey)) {
      const gIdx = Int32Array.from({ length: K }, (_, k) => Math.floor(k / g));
      out.set(gKey, { name: gKey, dtype: "int32", shape: [K], bytes: new Uint8Array(gIdx.buffer) });
    }
    m.useHubWeight(new PackedIntWeight({ layout: quant.method, bits: quant.bits, zeroOffset: quant.method === "gptq" ? quant.zeroOffset : 0 }, K, N, Math.ceil(K / g)));
  }
  return out;
}
