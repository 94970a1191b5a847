/**
 * The serving engine in-process, without HTTP: where a step's time goes at N running sequences.
 *   node dist/bench/serve_engine.js --model DIR [--seqs 32] [--input-len 128] [--output-len 16] [--kv-dtype float32]
 * Queues N random prompts at once (ignore_eos, greedy), runs them to the end, and prints one JSON
 * line: the prefill and decode phases' wall time, the mean decode step, and per decode step the
 * time in the model's forward (the device work: GEMMs, attention, …), in reading back the next
 * ids, and in the engine's own JS (scheduling, slot tables, sampling, reporting). With --seqs 1
 * the same numbers for one sequence: the batched/sequential decode speed-up is their ratio.
 */
import { parseArgs } from "node:util";
import { randomPrompt } from "../src/serve/bench.js";
import { Engine } from "../src/serve/engine.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";

const { values } = parseArgs({ options: {
  model: { type: "string" }, seqs: { type: "string", default: "32" }, "input-len": { type: "string", default: "128" }, "output-len": { type: "string", default: "16" },
  "max-num-batched-tokens": { type: "string", default: "512" }, "kv-dtype": { type: "string" },
} });
if (!values.model) throw new Error("--model is required");
const N = Number(values.seqs), L = Number(values["input-len"]), O = Number(values["output-len"]);
const model = await AutoModelForCausalLM.fromPretrained(values.model);
const engine = new Engine(model, { maxNumSeqs: 64, maxNumBatchedTokens: Number(values["max-num-batched-tokens"]), blockSize: 16, kvCacheBytes: 2 ** 31, maxQueue: 256, maxModelLen: 2048,
  kvCacheDtype: values["kv-dtype"] as "float32" | "bfloat16" | undefined });

// Time the model's forward inside each step (the engine calls model.forward once per step).
let forwardMs = 0;
const forward = model.forward.bind(model);
model.forward = ((...a: Parameters<typeof forward>) => {
  const t = performance.now();
  try { return forward(...a); } finally { forwardMs += performance.now() - t; }
}) as typeof model.forward;
const steps: { ms: number; forwardMs: number; tokens: number }[] = [];
let stepStart = 0, stepTokens = 0;
engine.observer = {
  step: (s) => { stepStart = performance.now(); stepTokens = s.tokens; forwardMs = 0; },
  firstToken: () => {}, token: () => {}, prefix: () => {},
  finished: () => {},
};
const origStep = (engine as unknown as { step: (c: unknown) => Promise<void> }).step.bind(engine);
(engine as unknown as { step: (c: unknown) => Promise<void> }).step = async (c) => {
  await origStep(c);
  steps.push({ ms: performance.now() - stepStart, forwardMs, tokens: stepTokens });
};

const t0 = performance.now();
await Promise.all(Array.from({ length: N }, (_, i) => new Promise<void>((resolve) => {
  engine.add(randomPrompt(L, 1000 + i), { maxTokens: O, temperature: 0, topP: 1, topK: 0, minP: 0, stop: [], stopTokenIds: [], ignoreEos: true, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 },
    (e) => { if (e.finish) resolve(); });
})));
const total = performance.now() - t0;
const decode = steps.filter((s) => s.tokens === N);
const prefill = steps.filter((s) => s.tokens !== N);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const r = (x: number) => Math.round(x * 10) / 10;
console.log(JSON.stringify({
  seqs: N, inputLen: L, outputLen: O, totalS: r(total / 1000),
  prefillSteps: prefill.length, prefillS: r(mean(prefill.map((s) => s.ms)) * prefill.length / 1000),
  decodeSteps: decode.length, decodeStepMs: r(mean(decode.map((s) => s.ms))), decodeForwardMs: r(mean(decode.map((s) => s.forwardMs))),
  decodeOtherMs: r(mean(decode.map((s) => s.ms - s.forwardMs))),
  decodeTokensPerS: r((N * 1000) / mean(decode.map((s) => s.ms))),
}));
