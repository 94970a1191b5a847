/**
 * compile's decode-step fusions on cpu against eager (same values within 1e-5; the fused kernels
 * run the eager kernels' arithmetic):
 * - rotary + KV write (compile/passes/rotary_kv.ts, native rotary_kv_write.cc): q's and k's rotary
 *   and the paged KV write as one rotaryKVWrite call, float32 and bfloat16 pools, with and without
 *   q's rotary, and the rotated k read elsewhere (no fusion);
 * - linear + argmax (compile/passes/linear_argmax.ts, native linear_argmax.cc): the final norm, the
 *   LM head and the argmax in one call with eager's ids for float32 and bfloat16 weights, one to
 *   many rows (the direct and the packed GEMM), a head wide enough to split over the pool, ties
 *   (the first maximum), NaN logits (the first NaN); logits read elsewhere keep their kernels;
 * - rotary gather (compile/passes/rotary_gather.ts, rotaryKVWrite's rows): the cos/sin gathers by
 *   position folded in (int32 and int64 positions), a position outside the tables still throwing
 *   embedding's RangeError;
 * - q/k norms (compile/passes/rotary_norm.ts, normRotaryKVWrite): the RMS norms of q and k folded
 *   in (float32 and bfloat16 weights, offset 0 and 1), not when their eps differ or a norm's result
 *   is read elsewhere.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { rotaryKVStep } from "./helpers/rotary_kv_step.js";
import { maxAbsDiff } from "./helpers/shared.js";
import { graphLog } from "./helpers/graph_log.js";
import { lcgValues } from "./helpers/lcg.js";
import { checkArgmaxTiesAndNaN } from "./helpers/linear_argmax_checks.js";

function rand(shape: number[], seed: number): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });
}

/** The kernel calls compile logged (TSORCH_LOGS=graph) for the first call of `f`. */
function kernelCalls(f: () => void): number {
  const logged = graphLog(f);
  const m = /: (\d+) kernel calls/.exec(logged);
  assert.ok(m, logged);
  return Number(m[1]);
}

async function close(got: torch.Tensor[], want: torch.Tensor[], what: string): Promise<void> {
  assert.equal(got.length, want.length, what);
  for (const [i, g] of got.entries()) {
    const [a, b] = [Array.from(await g.data(), Number), Array.from(await want[i].data(), Number)];
    assert.equal(a.length, b.length, `${what}[${i}]: length`);
    const d = maxAbsDiff(a, b);
    assert.ok(d <= 1e-5, `${what}[${i}]: max |compiled - eager| = ${d}`);
  }
}

test("compile: on cpu, q's and k's rotary and the paged KV write run as one rotaryKVWrite, within 1e-5 of eager", async () => {
  const [Hq, Hk, D] = [4, 2, 8];
  const step = (withQuery: boolean, keepKey: boolean) => rotaryKVStep(Hk, D, withQuery, keepKey);
  // [L, rotary dims R, with q's rotary, k's rotated values returned too, pool dtype, kernel calls]
  const cases = [[1, 8, true, false, "float32", 1], [5, 4, true, false, "float32", 1], [1, 8, true, false, "bfloat16", 1],
    [3, 8, false, false, "float32", 2], [2, 8, true, true, "float32", 3]] as const;
  for (const [L, R, withQuery, keepKey, dtype, calls] of cases) {
    torch.compiler.reset();
    const f = torch.compile(step(withQuery, keepKey));
    const args = (seed: number) => {
      const slots = torch.tensor(Int32Array.from({ length: L }, (_, i) => (seed * 3 + i * 5) % 16), { shape: [L], dtype: "int32" });
      return [rand([1, L, Hq, D], seed), rand([1, L, Hk, D], seed + 1), rand([L, Hk, D], seed + 2), rand([1, L, R], seed + 3), rand([1, L, R], seed + 4), slots] as const;
    };
    const pools = () => [torch.zeros([2, 8, Hk, D], { dtype }), torch.zeros([2, 8, Hk, D], { dtype })] as const;
    assert.equal(kernelCalls(() => f(...args(1), ...pools())), calls, `L ${L}, R ${R}, ${dtype}: kernel calls`);
    for (const seed of [2, 3]) {
      const [mine, theirs] = [pools(), pools()];
      const got = f(...args(seed), ...mine) as torch.Tensor[];
      const want = step(withQuery, keepKey)(...args(seed), ...theirs);
      await close([...got, ...mine], [...want, ...theirs], `L ${L}, R ${R}, ${dtype}, query ${withQuery}, key kept ${keepKey}, seed ${seed}`);
    }
  }
});

test("compile: on cpu, the rotary cos/sin gathers by position fold into rotaryKVWrite, within 1e-5 of eager", async () => {
  const [Hq, Hk, D, R, P] = [4, 2, 8, 8, 32];
  const step = (q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, cosT: torch.Tensor, sinT: torch.Tensor,
    slots: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor) =>
    rotaryKVStep(Hk, D, true, false)(q, k, v, torch.embedding(positions, cosT), torch.embedding(positions, sinT), slots, kc, vc);
  const [cosT, sinT] = [rand([P, R], 7), rand([P, R], 8)];
  let posDtype: "int32" | "int64" = "int32";
  const args = (L: number, seed: number, pos: number[]) => [rand([1, L, Hq, D], seed), rand([1, L, Hk, D], seed + 1), rand([L, Hk, D], seed + 2),
    torch.tensor(posDtype === "int64" ? pos.map(BigInt) : Int32Array.from(pos), { shape: [1, L], dtype: posDtype }), cosT, sinT,
    torch.tensor(Int32Array.from(pos, (p) => p % 16), { shape: [L], dtype: "int32" })] as const;
  const pools = () => [torch.zeros([2, 8, Hk, D]), torch.zeros([2, 8, Hk, D])] as const;
  const check = async (f: typeof step, L: number, seed: number, pos: number[], what: string) => {
    const [mine, theirs] = [pools(), pools()];
    const got = f(...args(L, seed, pos), ...mine) as torch.Tensor[];
    await close([...got, ...mine], [...step(...args(L, seed, pos), ...theirs), ...theirs], what);
  };
  for (const [L, pos, dtype] of [[1, [9], "int32"], [3, [30, 2, 17], "int32"], [2, [4, 31], "int64"]] as const) {
    posDtype = dtype;
    torch.compiler.reset();
    const f = torch.compile(step);
    assert.equal(kernelCalls(() => f(...args(L, 1, [...pos]), ...pools())), 1, `L ${L}: one call (no gathers)`);
    await check(f, L, 2, [...pos], `L ${L}`);
    await check(f, L, 3, pos.map((p) => (p + 5) % P), `L ${L}, new positions`);
    // A position outside the tables: embedding's RangeError, as eager throws.
    const bad = [...pos.slice(1), P + 3];
    assert.throws(() => step(...args(L, 4, bad), ...pools()), RangeError, `eager, L ${L}: position ${P + 3} of ${P}`);
    assert.throws(() => f(...args(L, 4, bad), ...pools()), /out of range \[0, 32\)/, `compiled, L ${L}: position ${P + 3} of ${P}`);
  }
});

test("compile: on cpu, q/k RMS norms before the rotary + KV write fold into one normRotaryKVWrite, within 1e-5 of eager", async () => {
  const [Hq, Hk, D, L] = [4, 2, 8, 1];
  const normed = (eps: [number, number], offset: number, keepNorm: boolean) => (q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    cos: torch.Tensor, sin: torch.Tensor, slots: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor) => {
    const qn = torch.rmsNorm(q, wq, eps[0], offset), kn = torch.rmsNorm(k, wk, eps[1], offset);
    const out = rotaryKVStep(Hk, D, true, false)(qn, kn, v, cos, sin, slots, kc, vc);
    return keepNorm ? [...out, qn] : out;
  };
  const args = (seed: number) => [rand([1, L, Hq, D], seed).mul(3), rand([1, L, Hk, D], seed + 1).mul(3), rand([L, Hk, D], seed + 2),
    rand([1, L, D], seed + 3), rand([1, L, D], seed + 4), torch.tensor(Int32Array.of(seed % 16), { shape: [L], dtype: "int32" })] as const;
  const weights = (wDtype: "float32" | "bfloat16") => [rand([D], 40).to(wDtype), rand([D], 41).to(wDtype)] as const;
  // [eps of q and k, weight offset, q's norm also returned, weight dtype, kernel calls]
  const cases = [[[1e-6, 1e-6], 0, false, "float32", 1], [[1e-6, 1e-6], 1, false, "bfloat16", 1],
    [[1e-6, 1e-5], 0, false, "float32", 3], [[1e-6, 1e-6], 0, true, "float32", 3]] as const;
  for (const [eps, offset, keepNorm, wDtype, calls] of cases) {
    torch.compiler.reset();
    const step = normed([...eps], offset, keepNorm), f = torch.compile(step);
    const pools = () => [torch.zeros([2, 8, Hk, D], { dtype: "bfloat16" }), torch.zeros([2, 8, Hk, D], { dtype: "bfloat16" })] as const;
    const what = `eps ${eps}, offset ${offset}, norm kept ${keepNorm}, ${wDtype} weights`;
    assert.equal(kernelCalls(() => f(...args(1), ...pools(), ...weights(wDtype))), calls, `${what}: kernel calls`);
    for (const seed of [2, 3]) {
      const [mine, theirs] = [pools(), pools()];
      const got = f(...args(seed), ...mine, ...weights(wDtype)) as torch.Tensor[];
      const want = step(...args(seed), ...theirs, ...weights(wDtype));
      await close([...got, ...mine], [...want, ...theirs], `${what}, seed ${seed}`);
    }
  }
});

const ids = async (t: torch.Tensor) => Array.from(await t.data(), Number);

test("compile: on cpu, the final norm, a linear and its argmax run as one linearArgmax with eager's ids", async () => {
  const head = (x: torch.Tensor, g: torch.Tensor, w: torch.Tensor) => torch.argmax(torch.linear(torch.rmsNorm(x, g, 1e-5), w), -1, true);
  const bare = (x: torch.Tensor, w: torch.Tensor) => torch.argmax(torch.linear(x, w), -1);
  // [rows, N, K, weight dtype]: one row (a decode step), a few, and 40 rows (prefill's packed GEMM); N up to 5000 (split over tasks).
  const shapes = [[1, 5000, 64, "float32"], [1, 3001, 48, "bfloat16"], [3, 100, 32, "float32"], [40, 77, 16, "bfloat16"], [2, 40, 30, "float32"]] as const;
  for (const [M, N, K, dtype] of shapes) {
    torch.compiler.reset();
    const f = torch.compile(head), fb = torch.compile(bare);
    const gain = rand([K], M + 10), weight = rand([N, K], N + 11).to(dtype);
    assert.equal(kernelCalls(() => f(rand([M, K], 1), gain, weight)), 1, `${M}x${N}x${K} ${dtype}: one call`);
    assert.equal(kernelCalls(() => fb(rand([M, K], 1), weight)), 1, `${M}x${N}x${K} ${dtype} without a norm: one call`);
    for (const s of [20, 30]) {
      const input = rand([M, K], s);
      assert.deepEqual(await ids(f(input, gain, weight) as torch.Tensor), await ids(head(input, gain, weight)), `${M}x${N}x${K} ${dtype}, input ${s}`);
      assert.deepEqual(await ids(fb(input, weight) as torch.Tensor), await ids(bare(input, weight)), `${M}x${N}x${K} ${dtype} without a norm, input ${s}`);
    }
  }
  // Ties in different tasks (columns 5, 2037, 4070 of 4096), NaN rows 3000 and 3900.
  await checkArgmaxTiesAndNaN("cpu", 4096, [5, 2037, 4070], [3000, 3900], kernelCalls);
});
