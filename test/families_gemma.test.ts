/**
 * Gemma, Gemma 2 and Gemma 3 (text) against transformers' outputs on the tiny fixtures (tolerance
 * 1e-4 absolute on float32 logits), and the sliding-window KV cache: a sliding layer keeps only its
 * window, yet cached attention equals attention over the whole sequence.
 */
import assert from "node:assert/strict";
import { symlinkSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { causalAttention } from "../src/nn/attention.js";
import { tensor } from "../src/tensor/creation.js";
import { argmax } from "../src/tensor/ops.js";
import type { Tensor } from "../src/tensor/tensor.js";
import { AutoModelForCausalLM, KVCache, type CacheImplementation, type PreTrainedModel } from "../src/transformers/index.js";
import { paddingMask } from "../src/transformers/modeling_utils.js";
import type { Gemma2ForCausalLM } from "../src/transformers/models/gemma2.js";
import { maxAbsDiff, missing, readJson, TINY } from "./helpers/shared.js";
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";
import { tempDir } from "./helpers/temp_dir.js";

const CACHES: CacheImplementation[] = ["dynamic", "static"];
const FAMILIES = ["gemma", "gemma2", "gemma3_text"];

for (const family of FAMILIES) testTinyFixture(family);

// ------------------------------------------------------------------ sliding-window KV cache

/** Greedy continuation by a full forward over the whole sequence at every step (no cache). */
async function greedyWithoutCache(model: PreTrainedModel, ids: number[][], mask: number[][], steps: number): Promise<number[][]> {
  const seqs = ids.map((r) => [...r]), m = mask.map((r) => [...r]);
  for (let s = 0; s < steps; s++) {
    const L = seqs[0].length;
    const next = await argmax(model.logits(seqs, m).narrow(1, L - 1, 1), -1).data();
    seqs.forEach((r, b) => r.push(Number(next[b])));
    m.forEach((r) => r.push(1));
  }
  return seqs.map((r) => r.slice(ids[0].length));
}

for (const family of ["gemma2", "gemma3_text"]) {
  const dir = path.join(TINY, family);

  test(`${family} (tiny): 40 greedy tokens past the sliding window equal a full recomputation, both caches`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const e = readJson(path.join(dir, "expected.json"));
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const n = 40;
    const lp = e.greedy_left_padded;
    const cases: [string, number[][], number[][]][] = [
      ["row 0", [e.input_ids[0]], [e.input_ids[0].map(() => 1)]],
      ["left-padded batch", lp.input_ids, lp.attention_mask],
    ];
    for (const [name, ids, mask] of cases) {
      const want = await greedyWithoutCache(model, ids, mask, n);
      for (const cache of CACHES) {
        const out = await model.generate(ids, { maxNewTokens: n, doSample: false, attentionMask: mask, cacheImplementation: cache, eosTokenId: [] });
        assert.deepEqual(out.map((r) => r.slice(ids[0].length)), want, `${cache} ${name}`);
      }
    }
  });
}

test("mistral (tiny) with sliding_window 4: cached greedy equals a full recomputation, both caches", async (t) => {
  const src = path.join(TINY, "mistral");
  const skip = missing(src);
  if (skip) return t.skip(skip);
  const dir = tempDir("tsorch-mistral-window-");
  writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...readJson(path.join(src, "config.json")), sliding_window: 4 }));
  symlinkSync(path.join(src, "model.safetensors"), path.join(dir, "model.safetensors"));
  const e = readJson(path.join(src, "expected.json"));
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  const lp = e.greedy_left_padded;
  const want = await greedyWithoutCache(model, lp.input_ids, lp.attention_mask, 30);
  for (const cache of CACHES) {
    const out = await model.generate(lp.input_ids as number[][], { maxNewTokens: 30, doSample: false, attentionMask: lp.attention_mask, cacheImplementation: cache, eosTokenId: [] });
    assert.deepEqual(out.map((r) => r.slice(lp.input_ids[0].length)), want, cache);
  }
});

test("gemma2 (tiny): sliding layers keep at most window - 1 positions in a buffer of at most 2 * window", async (t) => {
  const dir = path.join(TINY, "gemma2");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const e = readJson(path.join(dir, "expected.json"));
  const model = (await AutoModelForCausalLM.fromPretrained(dir)) as Gemma2ForCausalLM;
  const window = model.c.slidingWindow, ids = e.input_ids[0] as number[], steps = 30;
  assert.ok(window > 0 && window < ids.length + steps);
  for (const kind of CACHES) {
    const cache = new KVCache(model.numLayers, kind, ids.length + steps);
    let logits = model.forward({ inputIds: model.idsTensor([ids]), positionIds: [ids.map((_, i) => i)], attentionMask: null, cache, logitsToKeep: 1 });
    for (let s = 0; s < steps; s++) {
      const next = Number((await argmax(logits, -1).data())[0]);
      logits = model.forward({ inputIds: model.idsTensor([[next]]), positionIds: [[ids.length + s]], attentionMask: null, cache, logitsToKeep: 1 });
      cache.layers.forEach((layer, i) => {
        assert.equal(layer.seqLength, ids.length + s + 1);
        if (model.c.layerTypes[i] === "sliding_attention") {
          assert.ok(layer.storedLength <= window - 1 && layer.capacity <= 2 * window, `${kind} layer ${i}: ${layer.storedLength} kept, capacity ${layer.capacity}`);
        } else {
          assert.equal(layer.storedLength, layer.seqLength, `${kind} layer ${i} (full attention)`);
        }
      });
    }
  }
});

/** Deterministic float32 values in [-1, 1] of `shape`. */
function noise(shape: number[], seed: number): Tensor {
  const data = Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(i * 12.9898 + seed * 78.233));
  return tensor(data, { shape, dtype: "float32" });
}

test("sliding-window cache: chunked cached attention equals whole-sequence attention (padding, both caches)", async () => {
  // Chunks chosen to take every path: fill, append, move to the front through a copy (overlapping
  // ranges), a chunk longer than the buffer (joined, not stored), plain moves to the front.
  const chunks = [2, 1, 4, 9, 1, 1, 1, 1, 1, 1, 1, 1];
  const B = 2, Hq = 2, Hkv = 1, D = 4, T = chunks.reduce((a, b) => a + b, 0);
  const q = noise([B, T, Hq, D], 1), k = noise([B, T, Hkv, D], 2), v = noise([B, T, Hkv, D], 3);
  const attention = [Array(T).fill(1), [0, 0, 0, ...Array(T - 3).fill(1)]];
  for (const window of [3, 0]) {
    const opts = (mask: number[][]) => ({ scale: D ** -0.5, mask: paddingMask(mask, q.device), window });
    const whole = (await causalAttention(q, k, v, null, opts(attention)).data()) as Float32Array;
    for (const kind of CACHES) {
      const cache = new KVCache(1, kind, T).layers[0];
      let at = 0;
      for (const L of chunks) {
        const part = (x: Tensor) => x.narrow(1, at, L);
        const out = (await causalAttention(part(q), part(k), part(v), cache, opts(attention.map((r) => r.slice(0, at + L)))).data()) as Float32Array;
        const want = [0, 1].flatMap((b) => Array.from(whole.subarray((b * T + at) * Hq * D, (b * T + at + L) * Hq * D)));
        assert.ok(maxAbsDiff(out, want) < 1e-6, `window ${window}, ${kind}: chunk at ${at} of ${L}`);
        at += L;
        if (window) assert.ok(cache.storedLength <= window - 1 && cache.capacity <= 2 * window);
      }
    }
  }
});

// ------------------------------------------------------------------ CLI


testCliOnFixture("gemma3_text");
