/**
 * Mixture-of-experts families against Hugging Face transformers' outputs: the tiny random mixtral
 * and qwen3_moe fixtures (full logits within 1e-4 absolute; greedy ids of single rows and of a
 * left-padded batch, with dynamic and static caches), and the CLI on one of them.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as T from "../src/index.js";
import { testCliOnFixture, testTinyFixture } from "./helpers/fixture_checks.js";

test("gatherLinear: each row through its own expert's weight, unused experts skipped, bad index throws", async () => {
  const w = [0, 1, 2].map((e) => T.add(T.arange(0, 6, 1, { dtype: "float32" }).view(2, 3), e * 10)); // expert 1 unused
  const x = T.tensor([[[1, 2, 3], [0, 1, 0]], [[2, 0, 1], [1, 1, 1]]]);
  const idx = T.tensor([[2, 0], [2, 2]], { dtype: "int64" });
  const out = T.gatherLinear(x, w, idx);
  assert.deepEqual(out.shape, [2, 2, 2]);
  const want = await Promise.all([[0, 0, 2], [0, 1, 0], [1, 0, 2], [1, 1, 2]].map(async ([b, r, e]) => Array.from((await T.linear(x.select(0, b).select(0, r), w[e]).data()) as Float32Array)));
  assert.deepEqual(Array.from((await out.data()) as Float32Array), want.flat());
  assert.throws(() => T.gatherLinear(x, w, T.tensor([[0, 3], [1, 1]], { dtype: "int64" })), /expert index 3 is out of range for 3 weights/);
  assert.throws(() => T.gatherLinear(x, w, T.tensor([0, 1], { dtype: "int64" })), /leading shape/);
});

for (const arch of ["mixtral", "qwen3_moe"]) testTinyFixture(arch);

testCliOnFixture("qwen3_moe");
