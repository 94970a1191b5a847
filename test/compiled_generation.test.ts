/**
 * Compiled generation (generate({ compile: true }), model.compile(), `tsorch generate --compile`):
 * greedy ids equal eager generation's and transformers' (stories260K, the llama and qwen3
 * fixtures on cpu; stories260K on webgpu), step logits within 1e-5 (cpu) / 1e-4 (webgpu) of eager
 * forwards, and the compiler's stats prove reuse: one graph per prompt bucket plus one decode
 * graph replayed for every later step, nothing new for a prompt in the same bucket, a recompile
 * when a model parameter is replaced.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { compiler } from "../src/compile/index.js";
import { mul } from "../src/tensor/ops.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { fixtureExpected } from "./helpers/fixture_checks.js";
import { CLI, missing, STORIES, TINY } from "./helpers/shared.js";
import { checkStaticGreedy, checkStaticLogits } from "./helpers/static_checks.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

const run = promisify(execFile);
const PROMPT = [1, 403, 407, 261, 378];
const GREEDY = { doSample: false, eosTokenId: [] as number[] };

test("stories260K compiled on cpu: eager's greedy ids, logits within 1e-5, one decode graph reused", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const eager = await model.generate(PROMPT, { ...GREEDY, maxNewTokens: 40 });
  compiler.reset();
  assert.deepEqual(await model.generate(PROMPT, { ...GREEDY, maxNewTokens: 40, compile: true }), eager);
  // The prompt's bucket (8) and the decode step: 2 graphs; 39 decode steps, the first compiled, 38 replayed.
  let s = compiler.stats();
  assert.equal(s.compiles, 2);
  assert.equal(s.cacheHits, 38);
  assert.equal(s.graphBreaks, 0);
  // A prompt of another length in the same bucket: nothing new compiles, every call replays.
  const other = [1, 403, 407, 261, 378, 290, 333];
  const otherEager = await model.generate(other, { ...GREEDY, maxNewTokens: 40 });
  assert.deepEqual(await model.generate(other, { ...GREEDY, maxNewTokens: 40, compile: true }), otherEager);
  s = compiler.stats();
  assert.equal(s.compiles, 2);
  assert.equal(s.cacheHits, 38 + 40);
  // A longer prompt (bucket 16) compiles its prefill graph only; the decode graph (capacity 64) is reused.
  const long = [...other, 400, 401, 402];
  assert.deepEqual(await model.generate(long, { ...GREEDY, maxNewTokens: 40, compile: true }), await model.generate(long, { ...GREEDY, maxNewTokens: 40 }));
  s = compiler.stats();
  assert.equal(s.compiles, 3);
  assert.match(s.recompileReasons.at(-1)!, /args\[0\]: shape mismatch, expected \[1,8\], got \[1,16\]/, "compared with the nearest graph: the bucket-8 prefill");
  // A replaced parameter (here: the same values in a new tensor) recompiles instead of replaying stale weights.
  const norm = [...model.namedParameters()].find(([n]) => n === "model.norm.weight")![1];
  norm.set(mul(norm.value, 1));
  assert.deepEqual(await model.generate(PROMPT, { ...GREEDY, maxNewTokens: 40, compile: true }), eager);
  assert.ok(compiler.stats().recompileReasons.some((r) => /parameter 'model\.model\.norm\.weight' was replaced/.test(r)), compiler.stats().recompileReasons.join("; "));
  await checkStaticLogits(model, PROMPT, 1e-5, true);
});

test("generations of one prompt with different maxNewTokens keep every graph: a repeat compiles nothing, a new cache capacity recompiles naming the KV buffer", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  compiler.reset();
  // maxNewTokens 20 and 100 after a 5-token prompt (bucket 8): KV capacities 32 and 128, so two prefill and two decode graphs.
  const eager = new Map<number, number[]>();
  for (const n of [20, 100]) eager.set(n, (await model.generate(PROMPT, { ...GREEDY, maxNewTokens: n })) as number[]);
  for (const n of [20, 100, 20, 100]) assert.deepEqual(await model.generate(PROMPT, { ...GREEDY, maxNewTokens: n, compile: true }), eager.get(n), `maxNewTokens ${n}`);
  const s = compiler.stats();
  assert.equal(s.compiles, 4, `the repeats compile nothing (${s.recompileReasons.join("; ")})`);
  assert.equal(s.cacheHits, 2 * (19 + 99));
  assert.deepEqual(s.recompileReasons, [
    "generate.step: args[0]: shape mismatch, expected [1,8], got [1,1]", // decode after prefill
    "generate.step: args[6]: shape mismatch, expected [1,32,4,8], got [1,128,4,8]", // prefill of capacity 128: the layer-0 keys
    "generate.step: args[0]: shape mismatch, expected [1,8], got [1,1]", // its decode, nearest to that prefill
  ]);
});

test("model.compile() makes generate compile by default; a model without a static step is refused by name", async (t) => {
  const skip = missing(STORIES) ?? missing(path.join(TINY, "qwen3_5_text"));
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const eager = await model.generate(PROMPT, { ...GREEDY, maxNewTokens: 12 });
  assert.equal(await model.compile(), model);
  compiler.reset();
  assert.deepEqual(await model.generate(PROMPT, { ...GREEDY, maxNewTokens: 12 }), eager);
  assert.equal(compiler.stats().compiles, 2);
  const hybrid = await AutoModelForCausalLM.fromPretrained(path.join(TINY, "qwen3_5_text"));
  await assert.rejects(hybrid.compile(), /compile: .*no static \(graph-ready\) decode step; generate eagerly instead/);
});

for (const arch of ["llama", "qwen3"]) {
  test(`${arch} (tiny) compiled on cpu: transformers' greedy ids (single, left-padded batch), logits within 1e-5`, async (t) => {
    const dir = path.join(TINY, arch);
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    await checkStaticGreedy(model, arch, true);
    await checkStaticLogits(model, fixtureExpected(arch).input_ids[0], 1e-5, true);
  });
}

test("stories260K compiled on webgpu: eager's greedy ids, logits within 1e-4", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  const model = await AutoModelForCausalLM.fromPretrained(STORIES, { device: "webgpu" });
  const eager = await model.generate(PROMPT, { ...GREEDY, maxNewTokens: 24 });
  assert.deepEqual(await model.generate(PROMPT, { ...GREEDY, maxNewTokens: 24, compile: true }), eager);
  await checkStaticLogits(model, PROMPT, 1e-4, true);
});

test("stories260K compiled greedy (ids kept on the device, steps queued ahead): eager's sequences and finish reasons when rows stop at different steps", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const prompts = [[0, 0, 1, 403, 407], [1, 290, 333, 261, 378]];
  const attentionMask = prompts.map((r) => r.map((id, i) => (i < 2 && r[0] === 0 ? 0 : 1)));
  // An EOS id that row 0 picks partway through (from a run without EOS), so the rows end at different steps.
  const free = await model.generate(prompts, { ...GREEDY, maxNewTokens: 30, attentionMask });
  const eos = free[0][prompts[0].length + 10];
  for (const maxNewTokens of [1, 2, 30]) {
    const opts = { doSample: false, eosTokenId: [eos], maxNewTokens, attentionMask, returnDictInGenerate: true as const };
    const eager = await model.generate(prompts, opts);
    assert.deepEqual(await model.generate(prompts, { ...opts, compile: true }), eager, `${maxNewTokens} new tokens`);
    if (maxNewTokens === 30) assert.equal(eager.finishReason[0], "eos");
  }
});

test("tsorch generate --compile prints eager's output (text and json)", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const tsorch = async (args: string[]) => (await run(process.execPath, [CLI, "generate", "--model", STORIES, "--max-new-tokens", "24", ...args])).stdout;
  const text = ["--prompt", "Once upon a time"];
  assert.equal(await tsorch([...text, "--compile"]), await tsorch(text));
  const json = ["--input-ids", "1,403,407;1,403,407,261,378", "--output", "json"];
  const compiled = JSON.parse(await tsorch([...json, "--compile"]));
  assert.deepEqual(compiled, JSON.parse(await tsorch(json)));
  assert.equal(compiled.new_token_ids.length, 2);
});
