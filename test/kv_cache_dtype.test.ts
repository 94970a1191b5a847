/**
 * The KV cache in the model's dtype (transformers keeps keys/values in the dtype the model computes
 * in): a bfloat16 model caches bfloat16 keys/values, half the memory of float32, unless generate is
 * told `cacheDtype: "float32"`. Reference: transformers' float32 greedy continuations of
 * stories260K (../shared/models/stories260K/expected.json).
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { causalAttention } from "../src/nn/attention.js";
import { AutoModelForCausalLM, KVCache } from "../src/transformers/index.js";
import { maxAbsDiff, missing, readJson, STORIES } from "./helpers/shared.js";

function random(shape: number[], seed: number) {
  let s = seed;
  const n = shape.reduce((a, b) => a * b, 1);
  return torch.tensor(Float32Array.from({ length: n }, () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1), { shape });
}

test("a bfloat16 KV cache stores keys/values rounded to bfloat16 in half the bytes, and attention over it stays close to float32", async () => {
  const [B, L, H, D] = [1, 6, 2, 8];
  const q = random([B, 1, 4, D], 1), k = random([B, L, H, D], 2), v = random([B, L, H, D], 3);
  const half = new KVCache(1, "static", 8, "bfloat16").layers[0];
  const full = new KVCache(1, "static", 8).layers[0];
  const h = half.update(k, v), f = full.update(k, v);
  assert.equal(h.keys.dtype, "bfloat16");
  assert.equal(h.keys.storage.nbytes * 2, f.keys.storage.nbytes);
  const cached = (await h.keys.to("float32").data()) as Float32Array;
  const rounded = (await k.transpose(1, 2).to("bfloat16").to("float32").data()) as Float32Array;
  assert.deepEqual(Array.from(cached), Array.from(rounded));
  // One decode step over each cache: bf16 rounding of K/V (relative 2^-8) bounds the difference.
  const mk = () => ({ scale: D ** -0.5, mask: null });
  const a = await causalAttention(q, random([B, 1, H, D], 4), random([B, 1, H, D], 5), half, mk()).data();
  const b = await causalAttention(q, random([B, 1, H, D], 4), random([B, 1, H, D], 5), full, mk()).data();
  assert.ok(maxAbsDiff(a as Float32Array, b as Float32Array) < 1e-2, `bf16 cache differs by ${maxAbsDiff(a as Float32Array, b as Float32Array)}`);
});

test("KVCache refuses a non-floating dtype", () => {
  assert.throws(() => new KVCache(1, "dynamic", 8, "int32" as "float32"), /KV cache dtype must be float32, float16 or bfloat16, got 'int32'/);
});

test("stories260K in bfloat16: model.dtype is bfloat16, greedy with the bf16 cache and with cacheDtype float32 equals transformers' float32 greedy", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const expected = readJson(path.join(STORIES, "expected.json"));
  assert.equal((await AutoModelForCausalLM.fromPretrained(STORIES)).dtype, "float32");
  const model = await AutoModelForCausalLM.fromPretrained(STORIES, { dtype: "bfloat16" });
  assert.equal(model.dtype, "bfloat16");
  for (const g of expected.generation) {
    const L = g.input_ids.length;
    for (const cacheDtype of [undefined, "float32"] as const) {
      const out = await model.generate(g.input_ids as number[], { maxNewTokens: 64, cacheDtype });
      assert.deepEqual(out.slice(L), g.greedy_new_ids, `greedy with cache ${cacheDtype ?? "bfloat16 (model dtype)"}`);
    }
  }
});
