/**
 * `node dist/bench/moe_kernels.js --model DIR [--device cpu|webgpu] [--kernels] [--batch 64]
 *  [--prompt 8] [--new-tokens 32] [--max-decode-s S]`: greedy decode of a batch of random prompts,
 * built-in forwards or kernelized with hub-kernels/ (RMSNorm, SiluAndMul, MoE). Prints JSON: decode
 * tokens/s (the first token excluded), prefill seconds, and a digest of the generated ids (equal
 * digests = equal greedy ids). `--max-decode-s`: stop decoding after the step that passes S seconds
 * (new_tokens then says how many were made; the digest covers only those). bench/moe_kernels.sh
 * runs every configuration and the PyTorch peer in one run. Compiles in a checkout of an older
 * commit too (the kernels module is imported by a computed name), for measuring its built-in path.
 */
import { createHash } from "node:crypto";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    model: { type: "string" }, device: { type: "string", default: "cpu" }, kernels: { type: "boolean", default: false },
    batch: { type: "string", default: "64" }, prompt: { type: "string", default: "8" }, "new-tokens": { type: "string", default: "32" },
    "max-decode-s": { type: "string" },
  },
});
if (!values.model) throw new Error("--model DIR is required");
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const batch = Number(values.batch), prompt = Number(values.prompt), newTokens = Number(values["new-tokens"]);
const model = await AutoModelForCausalLM.fromPretrained(values.model, { device: values.device });
if (values.kernels) {
  const kernelsModule = "../src/kernels/index.js";
  const { kernelize, LayerRepository } = await import(kernelsModule) as {
    kernelize(model: unknown, opts: { device: string; mapping: Record<string, Record<string, unknown>> }): Promise<unknown>;
    LayerRepository: new (opts: { repoId: string; layerName: string }) => unknown;
  };
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../hub-kernels");
  const repo = (name: string, layerName: string) => ({ [values.device!]: new LayerRepository({ repoId: path.join(root, name), layerName }) });
  await kernelize(model, { device: values.device!, mapping: { RMSNorm: repo("rmsnorm", "RMSNorm"), SiluAndMul: repo("silu-and-mul", "SiluAndMul"), MoE: repo("moe-grouped-gemm", "MoE") } });
}
let s = 12345;
const vocab = model.config.vocab_size as number;
const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) % vocab);
const opts = { maxNewTokens: newTokens, doSample: false, eosTokenId: [] as number[] };
await model.generate([[1, 2, 3, 4]], { ...opts, maxNewTokens: 2 }); // warm-up (pipelines, weights)
const ids = Array.from({ length: batch }, () => Array.from({ length: prompt }, rand));
const out: number[][] = ids.map(() => []);
const t0 = performance.now();
let first = 0, steps = 0;
const maxDecodeMs = values["max-decode-s"] ? Number(values["max-decode-s"]) * 1000 : Infinity;
for await (const step of model.generateStream(ids, opts)) {
  (step as number[]).forEach((t, b) => out[b].push(t));
  if (steps++ === 0) first = performance.now();
  else if (performance.now() - first > maxDecodeMs) break;
}
const end = performance.now();
process.stdout.write(JSON.stringify({
  device: values.device, kernels: values.kernels, batch, prompt, new_tokens: steps,
  prefill_s: (first - t0) / 1000, decode_tokens_per_s: (batch * (steps - 1)) / ((end - first) / 1000),
  ids_digest: createHash("sha256").update(JSON.stringify(out)).digest("hex").slice(0, 16),
}) + "\n");
