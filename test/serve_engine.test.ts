/**
 * The serving engine below HTTP: the block pool's reference counts, prefix registry and LRU
 * eviction; continuous batching with chunked prefill and preemption under a KV cache too small for
 * every sequence at once (outputs still equal `generate`'s greedy ids, and every block comes back);
 * and the same engine on webgpu.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import "../src/devices/builtin.js";
import { BlockPool } from "../src/serve/block_pool.js";
import { Engine } from "../src/serve/engine.js";
import type { SamplingParams } from "../src/serve/sequence.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import type { PreTrainedModel } from "../src/transformers/modeling_utils.js";
import { missing, readJson, STORIES } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

const skip = missing(STORIES);

const greedy = (maxTokens: number): SamplingParams => ({
  maxTokens, temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, stop: [], stopTokenIds: [], ignoreEos: true,
});

/** Run prompts through the engine at once; resolves with each one's new ids. */
function runAll(engine: Engine, jobs: { prompt: number[]; max: number }[]): Promise<number[][]> {
  return Promise.all(jobs.map((j) => new Promise<number[]>((resolve) => {
    const ids: number[] = [];
    engine.add(j.prompt, greedy(j.max), (e) => {
      if (e.token >= 0) ids.push(e.token);
      if (e.finish) resolve(ids);
    });
  })));
}

async function reference(model: PreTrainedModel, jobs: { prompt: number[]; max: number }[]): Promise<number[][]> {
  return Promise.all(jobs.map(async (j) => (await model.generate(j.prompt, { maxNewTokens: j.max, doSample: false, eosTokenId: [] })).slice(j.prompt.length)));
}

test("block pool: reference counts, prefix lookups and least-recently-used eviction", () => {
  const pool = new BlockPool(3, 4);
  const a = pool.allocate(), b = pool.allocate();
  pool.register(a, "A");
  pool.register(b, "B");
  assert.equal(pool.numUsed, 2);
  assert.equal(pool.lookup("A"), a);
  pool.release(a);
  assert.equal(pool.numUsed, 2, "a is still referenced once");
  pool.release(a);
  pool.release(b);
  assert.equal(pool.numUsed, 0);
  assert.equal(pool.lookup("A"), a, "a freed cached block is found again");
  pool.release(a);
  const c = pool.allocate(); // the never-used block first
  const d = pool.allocate(); // then the least recently used cached block: b
  assert.notEqual(c, a);
  assert.equal(d, b);
  assert.equal(pool.lookup("B"), -1, "an evicted block is no longer cached");
  assert.equal(pool.lookup("A"), a);
  assert.equal(pool.allocate(), -1, "nothing left");
  assert.deepEqual([pool.queries, pool.hits], [4, 3]);
  assert.throws(() => { pool.release(c); pool.release(c); }, /released more often than it was taken/);
});

test("continuous batching with chunked prefill and preemption equals sequential greedy ids", { skip }, async () => {
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const story: number[] = readJson(`${STORIES}/expected.json`).greedy_from_bos.new_ids;
  // 36 blocks of 4 positions: one 128-position sequence fits, six of ~100 do not.
  const blockBytes = 5 * 4 * 4 * 8 * 2 * 4;
  const engine = new Engine(model, { maxNumSeqs: 6, maxNumBatchedTokens: 24, maxModelLen: 128, blockSize: 4, kvCacheBytes: 36 * blockBytes, maxQueue: 16 });
  assert.equal(engine.pool.numBlocks, 36);
  const jobs = Array.from({ length: 6 }, (_, i) => ({ prompt: [1, ...story.slice(i, i + 10 + 7 * i)], max: 60 + 3 * i }));
  const [got, want] = [await runAll(engine, jobs), await reference(model, jobs)];
  got.forEach((ids, i) => assert.deepEqual(ids, want[i], `sequence ${i}`));
  assert.ok(engine.scheduler.preemptions > 0, "the pool was too small, so sequences were preempted and recomputed");
  assert.equal(engine.pool.numUsed, 0);
  // Recomputed sequences found their own earlier blocks in the prefix cache.
  assert.ok(engine.pool.hits > 0);
});

test("a bfloat16 model keeps bfloat16 block pools (as generate keeps its KV cache), half the bytes per block, and gives generate's greedy ids", { skip }, async () => {
  const model = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype: "bfloat16" });
  const o = { maxNumSeqs: 4, maxNumBatchedTokens: 16, maxModelLen: 96, blockSize: 4, kvCacheBytes: 1 << 20, maxQueue: 4 };
  const engine = new Engine(model, o);
  assert.equal(engine.cache.dtype, "bfloat16");
  const f32Blocks = new Engine(model, { ...o, kvCacheDtype: "float32" }).pool.numBlocks;
  assert.ok(engine.pool.numBlocks >= 2 * f32Blocks && engine.pool.numBlocks <= 2 * f32Blocks + 1, `${engine.pool.numBlocks} vs ${f32Blocks}`);
  const story: number[] = readJson(`${STORIES}/expected.json`).greedy_from_bos.new_ids;
  const jobs = Array.from({ length: 4 }, (_, i) => ({ prompt: [1, ...story.slice(i, i + 3 + 9 * i)], max: 40 + 5 * i }));
  const [got, want] = [await runAll(engine, jobs), await reference(model, jobs)];
  got.forEach((ids, i) => assert.deepEqual(ids, want[i], `sequence ${i}`));
  assert.equal(engine.pool.numUsed, 0);
});

test("a bfloat16 model on webgpu gets float32 block pools (its paged kernels take no others); asking for bfloat16 pools there is refused", { skip }, async (t) => {
  if (!(await webgpuOrSkip(t))) return;
  const model = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype: "bfloat16", device: "webgpu" });
  const o = { maxNumSeqs: 4, maxNumBatchedTokens: 16, maxModelLen: 96, blockSize: 4, kvCacheBytes: 1 << 20, maxQueue: 4 };
  assert.equal(new Engine(model, o).cache.dtype, "float32");
  assert.throws(() => new Engine(model, { ...o, kvCacheDtype: "bfloat16" }),
    /^Error: kvCacheDtype bfloat16: the webgpu device's paged-attention kernels do not take bfloat16 KV pools; use float32$/);
});

test("a prompt longer than max-model-len and a KV cache too small for one sequence are refused", { skip }, async () => {
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  assert.throws(() => new Engine(model, { maxNumSeqs: 1, maxNumBatchedTokens: 8, blockSize: 4, kvCacheBytes: 1 << 10, maxQueue: 1 }), /KV cache of 1024 bytes holds 0 blocks .* raise --kv-cache-memory or lower --max-model-len/);
  const engine = new Engine(model, { maxNumSeqs: 1, maxNumBatchedTokens: 8, maxModelLen: 16, blockSize: 4, kvCacheBytes: 1 << 20, maxQueue: 1 });
  assert.throws(() => engine.add(Array.from({ length: 16 }, () => 5), greedy(1), () => {}), /prompt has 16 tokens; the maximum context length is 16/);
  assert.throws(() => engine.add([1, 9999], greedy(1), () => {}), /token id 9999 .* is not an integer in \[0, 512\)/);
});

test("the engine runs on webgpu and gives cpu generate's greedy ids", { skip }, async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const cpu = await AutoModelForCausalLM.fromPretrained(STORIES);
  const gpu = await AutoModelForCausalLM.fromPretrained(STORIES, { device: "webgpu" });
  const engine = new Engine(gpu, { maxNumSeqs: 4, maxNumBatchedTokens: 16, maxModelLen: 64, blockSize: 8, kvCacheBytes: 1 << 20, maxQueue: 4 });
  const jobs = [{ prompt: [1, 403, 407, 261, 378], max: 12 }, { prompt: [1, 291, 280, 294, 262, 294, 353, 265, 284, 294], max: 9 }, { prompt: [1], max: 14 }];
  const [got, want] = [await runAll(engine, jobs), await reference(cpu, jobs)];
  got.forEach((ids, i) => assert.deepEqual(ids, want[i], `sequence ${i}`));
  assert.equal(engine.pool.numUsed, 0);
});
