/**
 * The cpu addon's one-call gatherLinear (rows counting-sorted by expert, every expert's GEMM in one
 * parallel region, scattered back) against the per-expert reference: each expert's rows gathered
 * and run through `linear`, on ragged groups (an expert with no rows, one row, many rows) with
 * float32, bfloat16 and float16 weights.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as T from "../src/index.js";
import { lcgValues } from "./helpers/lcg.js";

// Expert of each row: expert 0 has no rows, 1 one row, 2 nineteen rows (more than one 16-row
// block), 3 three rows, 4 two rows; rows of an expert are not adjacent.
const groups = [0, 1, 19, 3, 2];
const ids = groups.flatMap((n, e) => Array.from({ length: n }, () => e));
const order = ids.map((_, i) => (i * 11) % ids.length); // 11 is coprime with 25: a permutation
const idxValues = order.map((i) => ids[i]);

for (const dtype of ["float32", "bfloat16", "float16"] as const) {
  for (const [N, K] of [[50, 37], [200, 64]]) {
    test(`cpu gatherLinear: ${dtype} weights [${N}, ${K}] on ragged expert groups equal per-expert linear`, async () => {
      const M = idxValues.length;
      const x = T.tensor(lcgValues(M * K, 1)).view(M, K);
      const w = groups.map((_, e) => T.tensor(lcgValues(N * K, 100 + e)).view(N, K).to(dtype));
      const out = (await T.gatherLinear(x, w, T.tensor(idxValues, { dtype: "int64" })).data()) as Float32Array;
      for (let e = 0; e < groups.length; e++) {
        const rows = idxValues.flatMap((v, m) => (v === e ? [m] : []));
        if (rows.length === 0) continue;
        const ref = (await T.linear(T.embedding(T.tensor(rows, { dtype: "int64" }), x), w[e]).data()) as Float32Array;
        rows.forEach((m, i) => {
          for (let n = 0; n < N; n++) {
            const got = out[m * N + n], want = ref[i * N + n];
            assert.ok(Math.abs(got - want) <= 1e-5 * (1 + Math.abs(want)), `expert ${e} row ${m} col ${n}: ${got} vs ${want}`);
          }
        });
      }
    });
  }
}

test("cpu gatherLinear: an expert index past the weights is a RangeError naming it", () => {
  const w = [T.full([4, 3], 0), T.full([4, 3], 0)];
  assert.throws(() => T.gatherLinear(T.full([3, 3], 0), w, T.tensor([1, 2, 0], { dtype: "int64" })), (e: Error) => e instanceof RangeError && /expert index 2 is out of range for 2 weights/.test(e.message));
  assert.throws(() => T.gatherLinear(T.full([1, 3], 0), w, T.tensor([-1], { dtype: "int64" })), /expert index -1 is out of range for 2 weights/);
});

test("cpu gatherLinear: K = 0 gives zeros, also for an expert with more rows than one bf16 chunk", async () => {
  const M = 12, N = 5;
  // Scratch memory the kernels may reuse holds non-zeros first.
  await T.gatherLinear(T.full([M, 4], 1), [T.full([N, 4], 1).to("bfloat16")], T.tensor(new Array(M).fill(0), { dtype: "int64" })).data();
  const out = (await T.gatherLinear(T.full([M, 0], 1), [T.full([N, 0], 1).to("bfloat16")], T.tensor(new Array(M).fill(0), { dtype: "int64" })).data()) as Float32Array;
  assert.deepEqual([...out], new Array(M * N).fill(0));
});
