/**
 * compile's decode-step work on webgpu against eager, within 1e-4:
 * - linear grouping (compile/passes/linear_group.ts, the linearGroup kernel): adjacent linears
 *   sharing an input, with the rmsNorm before them as the group's prologue (few rows: the fused
 *   kernel; more rows or unaligned K: the separate kernels); a norm whose result something else
 *   reads stays its own kernel; an elementwise chain of exactly the products (SiLU(gate) * up) as
 *   the group's epilogue;
 * - rotary + KV write (compile/passes/rotary_kv.ts, the rotaryKVWrite kernel): q's and k's rotary
 *   and the paged write of k and v as one call, the pools equal to eager's;
 * - staged slots (devices/webgpu/graph.ts): small inputs and outputs copied through the graph's
 *   own buffers, so new argument tensors on every call, arguments the graph writes (also
 *   read-modify-write) and a large argument (bound directly) all see eager's values.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { rotaryKVStep } from "./helpers/rotary_kv_step.js";
import type { Device } from "../src/devices/device.js";
import { maxAbsDiff } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { graphLog } from "./helpers/graph_log.js";
import { lcgValues } from "./helpers/lcg.js";

function rand(shape: number[], seed: number, device: Device): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape, device });
}

async function close(a: torch.Tensor[], b: torch.Tensor[], what: string): Promise<void> {
  assert.equal(a.length, b.length, what);
  for (const [i, t] of a.entries()) {
    assert.deepEqual(t.shape, b[i].shape, `${what}[${i}]: shape`);
    const d = maxAbsDiff(Array.from(await t.data(), Number), Array.from(await b[i].data(), Number));
    assert.ok(d <= 1e-4, `${what}[${i}]: max |compiled - eager| = ${d}`);
  }
}

/** The kernel calls compile logged (TSORCH_LOGS=graph) for the first call of `f`. */
function kernelCalls(f: () => void): number {
  const logged = graphLog(f);
  const m = /: (\d+) kernel calls/.exec(logged);
  assert.ok(m, logged);
  return Number(m[1]);
}

test("compile: on webgpu, a norm and the linears reading it run as one linearGroup, within 1e-4 of eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  // q/k/v after an input norm (Gemma's weight offset 1 in one case); K 22 is not a multiple of 4 (separate kernels).
  const qkv = (offset: number) => (x: torch.Tensor, g: torch.Tensor, ...ws: torch.Tensor[]) => {
    const h = torch.rmsNorm(x, g, 1e-5, offset);
    return ws.map((w) => torch.linear(h, w));
  };
  for (const [rows, K, offset, seed] of [[1, 24, 0, 1], [3, 24, 1, 2], [12, 24, 0, 3], [2, 22, 0, 4]] as const) {
    torch.compiler.reset();
    const f = torch.compile(qkv(offset));
    const ws = [40, 16, 16].map((n, i) => rand([n, K], seed + 10 + i, dev));
    const g = rand([K], seed + 20, dev);
    const x = rand([1, rows, K], seed, dev);
    assert.equal(kernelCalls(() => f(x, g, ...ws)), 1, `${rows} rows, K ${K}: one call`);
    const x2 = rand([1, rows, K], seed + 30, dev);
    await close(f(x2, g, ...ws) as torch.Tensor[], qkv(offset)(x2, g, ...ws), `${rows} rows, K ${K}, offset ${offset}, replayed`);
  }
  // Four linears on one input without a norm: groups of at most three.
  const four = (x: torch.Tensor, ...ws: torch.Tensor[]) => ws.map((w) => torch.linear(x, w));
  const ws = [8, 12, 16, 20].map((n, i) => rand([n, 32], 40 + i, dev));
  const x = rand([2, 32], 50, dev);
  torch.compiler.reset();
  const f4 = torch.compile(four);
  assert.equal(kernelCalls(() => f4(x, ...ws)), 2, "four linears: two calls");
  await close(f4(x, ...ws) as torch.Tensor[], four(x, ...ws), "four linears");
  // The norm's result is also returned: the norm stays a kernel, the linears still group.
  const shared = (x: torch.Tensor, g: torch.Tensor, a: torch.Tensor, b: torch.Tensor) => {
    const h = torch.rmsNorm(x, g, 1e-6);
    return [h, torch.linear(h, a), torch.linear(h, b)];
  };
  const [g, a, b] = [rand([32], 60, dev), rand([24, 32], 61, dev), rand([8, 32], 62, dev)];
  torch.compiler.reset();
  const fs = torch.compile(shared);
  assert.equal(kernelCalls(() => fs(x, g, a, b)), 2, "a norm read elsewhere: norm + group");
  await close(fs(x, g, a, b) as torch.Tensor[], shared(x, g, a, b), "norm read elsewhere");
  // An MLP's SiLU(gate) * up after a norm: one call (the chain as the epilogue), fused and fallback shapes;
  // a chain that also reads another tensor, or a product read twice, keeps its own kernel.
  const mlp = (x: torch.Tensor, g: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) => {
    const h = torch.rmsNorm(x, g, 1e-5);
    return torch.silu(torch.linear(h, gate)).mul(torch.linear(h, up));
  };
  const other = (x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, z: torch.Tensor) => torch.linear(x, gate).mul(torch.linear(x, up)).add(z);
  const twice = (x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) => {
    const p = torch.linear(x, gate);
    return [torch.silu(p).mul(torch.linear(x, up)), p];
  };
  for (const [rows, K, seed] of [[1, 32, 80], [3, 32, 81], [10, 32, 82], [2, 30, 83]] as const) {
    const [xm, gm, gate, up, z] = [rand([rows, K], seed, dev), rand([K], seed + 1, dev), rand([44, K], seed + 2, dev), rand([44, K], seed + 3, dev), rand([rows, 44], seed + 4, dev)];
    torch.compiler.reset();
    const fm = torch.compile(mlp), fo = torch.compile(other), ft = torch.compile(twice);
    assert.equal(kernelCalls(() => fm(xm, gm, gate, up)), 1, `mlp, ${rows} rows, K ${K}: one call`);
    assert.equal(kernelCalls(() => fo(xm, gate, up, z)), 2, `chain reading another tensor, ${rows} rows: group + chain`);
    assert.equal(kernelCalls(() => ft(xm, gate, up)), 2, `product read twice, ${rows} rows: group + chain`);
    const x2 = rand([rows, K], seed + 5, dev);
    await close([fm(x2, gm, gate, up)], [mlp(x2, gm, gate, up)], `mlp, ${rows} rows, K ${K}`);
    await close([fo(x2, gate, up, z)], [other(x2, gate, up, z)], `chain reading another tensor, ${rows} rows`);
    await close(ft(x2, gate, up) as torch.Tensor[], twice(x2, gate, up), `product read twice, ${rows} rows`);
  }
  // A linear reading only the first row of the norm's result: the norm stays its own kernel.
  const firstRow = (x: torch.Tensor, g: torch.Tensor, a: torch.Tensor) => torch.linear(torch.rmsNorm(x, g, 1e-5).narrow(0, 0, 1), a);
  const x3 = rand([3, 32], 90, dev);
  torch.compiler.reset();
  const fr = torch.compile(firstRow);
  assert.equal(kernelCalls(() => fr(x3, g, a)), 2, "a linear over part of the norm's rows: norm + linear");
  await close([fr(x3, g, a)], [firstRow(x3, g, a)], "part of the norm's rows");
  // A linear reading another's result is not grouped with it.
  const chain = (x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) => torch.linear(torch.linear(x, a), b);
  const [ca, cb] = [rand([32, 32], 70, dev), rand([16, 32], 71, dev)];
  torch.compiler.reset();
  const fc = torch.compile(chain);
  assert.equal(kernelCalls(() => fc(x, ca, cb)), 2, "a chain of linears: two calls");
  await close([fc(x, ca, cb)], [chain(x, ca, cb)], "chain");
});

test("compile: on webgpu, q's and k's rotary and the paged KV write run as one rotaryKVWrite, within 1e-4 of eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const [Hq, Hk, D] = [4, 2, 8];
  const step = (withQuery: boolean, keepKey: boolean) => rotaryKVStep(Hk, D, withQuery, keepKey);
  // [L, rotary dims R, with q's rotary, k's rotated values returned too, kernel calls]
  for (const [L, R, withQuery, keepKey, calls] of [[1, 8, true, false, 1], [5, 4, true, false, 1], [3, 8, false, false, 2], [2, 8, true, true, 3]] as const) {
    torch.compiler.reset();
    const f = torch.compile(step(withQuery, keepKey));
    const args = (seed: number) => {
      const slots = torch.tensor(Int32Array.from({ length: L }, (_, i) => (seed * 3 + i * 5) % 16), { shape: [L], dtype: "int32", device: dev });
      return [rand([1, L, Hq, D], seed, dev), rand([1, L, Hk, D], seed + 1, dev), rand([L, Hk, D], seed + 2, dev),
        rand([1, L, R], seed + 3, dev), rand([1, L, R], seed + 4, dev), slots] as const;
    };
    const pools = () => [torch.zeros([2, 8, Hk, D], { device: dev }), torch.zeros([2, 8, Hk, D], { device: dev })] as const;
    const first = pools();
    assert.equal(kernelCalls(() => f(...args(1), ...first)), calls, `L ${L}, R ${R}: kernel calls`);
    const [mine, theirs] = [pools(), pools()];
    const got = f(...args(2), ...mine) as torch.Tensor[];
    const want = step(withQuery, keepKey)(...args(2), ...theirs);
    await close([...got, ...mine], [...want, ...theirs], `L ${L}, R ${R}, query ${withQuery}, key kept ${keepKey}`);
  }
});

test("compile: on webgpu, small arguments and results go through staged buffers; new tensors, written arguments and large ones match eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  torch.compiler.reset();
  const f = (x: torch.Tensor, acc: torch.Tensor, out: torch.Tensor, big: torch.Tensor) => {
    torch.copyInto(acc.add(x), acc);          // read-modify-write of a small argument
    torch.copyInto(x.mul(3), out);            // a write into a small argument
    return [x.add(big.narrow(0, 0, 1)), torch.sum(big, 0, true)];
  };
  const g = torch.compile(f);
  for (const seed of [1, 2, 3, 4]) {
    const args = () => [rand([1, 16], seed, dev), rand([1, 16], seed + 1, dev), torch.zeros([1, 16], { device: dev }), rand([40, 16], seed + 2, dev)] as const;
    const [mine, theirs] = [args(), args()];
    const got = g(...mine) as torch.Tensor[], want = f(...theirs);
    await close([...got, mine[1], mine[2]], [...want, theirs[1], theirs[2]], `call ${seed}`);
  }
  assert.equal(torch.compiler.stats().cacheHits, 3);
});
