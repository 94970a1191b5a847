/**
 * The cpu addon's fused moeExperts (rows sorted by expert, gate|up in one grouped GEMM, silu * up in
 * place, down, the top-k weighting and the sum over slots folded into the last pass) against the
 * unfused reference: per projection gatherLinear, silu, mul, then the weighting and the sum over
 * the K slots as separate ops (SparseMoeBlock's former path). Ragged routing (unused experts, an
 * expert picked by most tokens), float32 and bfloat16 weights, int32 and int64 ids; bad inputs.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as T from "../src/index.js";
import { lcgValues } from "./helpers/lcg.js";

/** Unfused: the gate, up and down projections through gatherLinear, then weighting and sum. */
function reference(x: T.Tensor, gateUp: T.Tensor, down: T.Tensor, weights: T.Tensor, ids: T.Tensor): T.Tensor {
  const [Tn, H] = x.shape, [E, I2] = gateUp.shape, I = I2 / 2, K = ids.shape[1];
  const rows = x.unsqueeze(1).expand(Tn, K, H).reshape(Tn * K, H), idx = ids.reshape(Tn * K);
  const all = Array.from({ length: E }, (_, e) => e);
  const gate = T.gatherLinear(rows, all.map((e) => gateUp.select(0, e).narrow(0, 0, I)), idx);
  const up = T.gatherLinear(rows, all.map((e) => gateUp.select(0, e).narrow(0, I, I)), idx);
  const y = T.gatherLinear(T.mul(T.silu(gate), up), all.map((e) => down.select(0, e)), idx).view(Tn, K, H);
  return T.sum(T.mul(y, weights.unsqueeze(2)), 1);
}

const cases = [
  // tokens, hidden, intermediate, experts, top-k
  { Tn: 37, H: 48, I: 20, E: 9, K: 3 },
  { Tn: 64, H: 64, I: 40, E: 16, K: 8 },
  { Tn: 1, H: 33, I: 7, E: 4, K: 2 },
];
for (const dtype of ["float32", "bfloat16"] as const) {
  for (const idsDtype of ["int64", "int32"] as const) {
    for (const { Tn, H, I, E, K } of cases) {
      test(`cpu moeExperts: ${dtype} weights, ${idsDtype} ids, T ${Tn} H ${H} I ${I} E ${E} K ${K} equal the unfused ops`, async () => {
        const x = T.tensor(lcgValues(Tn * H, 1)).view(Tn, H);
        const gateUp = T.tensor(lcgValues(E * 2 * I * H, 2)).view(E, 2 * I, H).to(dtype);
        const down = T.tensor(lcgValues(E * H * I, 3)).view(E, H, I).to(dtype);
        const weights = T.tensor(lcgValues(Tn * K, 4).map((v) => v + 1.5)).view(Tn, K);
        // Distinct experts per token; expert 1 is never picked, expert 0 by most tokens.
        const used = Array.from({ length: E }, (_, e) => e).filter((e) => e !== 1);
        const picks = Array.from({ length: Tn }, (_, t) => Array.from({ length: K }, (_, j) => used[(j === 0 && t % 4 ? 0 : t * 5 + j * 3) % used.length]))
          .map((r) => [...new Set(r)].concat(used.filter((e) => !r.includes(e))).slice(0, K));
        const ids = T.tensor(picks.flat(), { dtype: idsDtype }).view(Tn, K);
        const got = (await T.moeExperts(x, gateUp, down, weights, ids).data()) as Float32Array;
        const want = (await reference(x, gateUp, down, weights, ids).data()) as Float32Array;
        assert.equal(got.length, Tn * H);
        for (let i = 0; i < got.length; i++) {
          assert.ok(Math.abs(got[i] - want[i]) <= 1e-5 * (1 + Math.abs(want[i])), `element ${i}: ${got[i]} vs ${want[i]}`);
        }
      });
    }
  }
}

test("cpu moeExperts: bad ids, shapes and dtypes throw naming the problem", () => {
  const x = T.full([2, 4], 1), gateUp = T.full([3, 6, 4], 0), down = T.full([3, 4, 3], 0), w = T.full([2, 2], 0.5);
  assert.throws(() => T.moeExperts(x, gateUp, down, w, T.tensor([0, 1, 3, 2], { dtype: "int64" }).view(2, 2)),
    (e: Error) => e instanceof RangeError && /expert index 3 is out of range for 3 experts/.test(e.message));
  assert.throws(() => T.moeExperts(x, gateUp, T.full([3, 4, 2], 0), w, T.tensor([0, 1, 2, 0], { dtype: "int64" }).view(2, 2)),
    (e: Error) => e instanceof RangeError && /moe_experts: .*down \[3,4,2\]/.test(e.message));
  assert.throws(() => T.moeExperts(x, gateUp, down.to("bfloat16"), w, T.tensor([0, 1, 2, 0], { dtype: "int64" }).view(2, 2)),
    (e: Error) => e instanceof TypeError && /gateUp \(float32\) and down \(bfloat16\) must have one dtype/.test(e.message));
  assert.throws(() => T.moeExperts(x, gateUp, down, w, T.full([2, 2], 0)), (e: Error) => e instanceof TypeError && /ids must be int32 or int64, got float32/.test(e.message));
});
