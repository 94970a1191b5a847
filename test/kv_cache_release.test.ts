/**
 * KV cache buffers go back to their device when a cache is done with them (KVCache.release, and the
 * old buffers when a dynamic cache grows), so that the next generate of the same size reuses memory
 * whose pages are already present instead of faulting fresh pages in during its decode steps.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { AutoModelForCausalLM, KVCache } from "../src/transformers/index.js";
import { lcgValues } from "./helpers/lcg.js";
import { missing, STORIES } from "./helpers/shared.js";

const rand = (shape: number[], seed: number) => torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });

/** Every storage `dev.allocate` hands out while `f` runs (size and handle). */
async function allocations(f: () => Promise<unknown>): Promise<[number, unknown][]> {
  const dev = torch.getDevice("cpu");
  const allocate = dev.allocate.bind(dev), log: [number, unknown][] = [];
  dev.allocate = (n: number) => {
    const s = allocate(n);
    log.push([n, s.handle]);
    return s;
  };
  try { await f(); } finally { dev.allocate = allocate; }
  return log;
}

test("KVCache.release empties the cache and hands its buffers to the device, which gives them out again; the cache stays usable", async () => {
  const dev = torch.getDevice("cpu");
  const [B, L, H, D] = [1, 3, 4, 64];
  const cache = new KVCache(1, "dynamic", 16);
  const layer = cache.layers[0];
  const room = layer.reserve!(rand([B, L, H, D], 1), rand([B, L, H, D], 2));
  const handles = new Set([room!.keyBuffer.storage.handle, room!.valueBuffer.storage.handle]);
  const nbytes = room!.keyBuffer.storage.nbytes;
  cache.release();
  assert.equal(cache.seqLength, 0);
  assert.equal(layer.capacity, 0);
  assert.ok(handles.has(dev.allocate(nbytes).handle), "a released buffer is handed out again");
  const k = rand([B, 2, H, D], 3), v = rand([B, 2, H, D], 4);
  const out = layer.update(k, v);
  assert.equal(cache.seqLength, 2);
  assert.deepEqual(Array.from(await out.keys.data(), Number), Array.from(await k.transpose(1, 2).data(), Number), "keys after release");
});

test("a dynamic cache that outgrows its buffers hands the old ones to the device", () => {
  const dev = torch.getDevice("cpu");
  const [B, H, D] = [1, 4, 64];
  const layer = new KVCache(1, "dynamic", 4).layers[0];
  const first = layer.reserve!(rand([B, 4, H, D], 1), rand([B, 4, H, D], 2))!;
  const old = new Set([first.keyBuffer.storage.handle, first.valueBuffer.storage.handle]);
  const nbytes = first.keyBuffer.storage.nbytes;
  layer.update(rand([B, 1, H, D], 3), rand([B, 1, H, D], 4));
  assert.ok(layer.capacity > 4, `grown to ${layer.capacity}`);
  assert.ok(old.has(dev.allocate(nbytes).handle), "an outgrown buffer is handed out again");
});

test("generate hands its dynamic cache back: a second generate of the same size allocates no buffer the first did not (stories260K)", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  // 60 new tokens: the cache buffers (5 layers, keys and values) are pooled sizes (>= 4 KB).
  const gen = () => allocations(() => model.generate([1, 403, 407], { maxNewTokens: 60, eosTokenId: [], doSample: false }));
  const first = await gen(), second = await gen();
  const seen = new Set(first.map(([, h]) => h));
  const fresh = second.filter(([n, h]) => n >= 4096 && !seen.has(h)).map(([n]) => n);
  assert.deepEqual(fresh, [], "buffers of the second generate not handed out during the first");
});
