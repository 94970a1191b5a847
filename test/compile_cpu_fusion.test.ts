/**
 * compile's fusions on cpu against eager: a linear's residual add in the product's epilogue
 * (the native linearAdd; one row takes the residual as the GEMM's bias), with float32 and
 * bfloat16 weights, within 1e-5 of eager's linear then add; and linear groups (the native
 * linearGroup: q/k/v or gate/up sharing one input, the rmsNorm before them and an MLP's
 * SiLU(gate) * up inside, one thread-pool job for few rows), equal to eager's separate ops.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { maxAbsDiff } from "./helpers/shared.js";
import { graphLog } from "./helpers/graph_log.js";
import { lcgValues } from "./helpers/lcg.js";

/** Deterministic pseudo-random float32 tensor with values in [-1, 1). */
function rand(shape: number[], seed: number): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });
}


async function close(a: torch.Tensor, b: torch.Tensor, tol: number, what: string): Promise<void> {
  assert.deepEqual(a.shape, b.shape, `${what}: shape`);
  const d = maxAbsDiff(Array.from(await a.data(), Number), Array.from(await b.data(), Number));
  assert.ok(d <= tol, `${what}: max |compiled - eager| = ${d} > ${tol}`);
}

for (const dtype of ["float32", "bfloat16"] as const) {
  test(`compile on cpu: a linear's residual add is fused into its epilogue (linearAdd, ${dtype} weights) within 1e-5 of eager`, async () => {
    torch.compiler.reset();
    const after = torch.compile(function after(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) { return torch.linear(x, w, b).add(r); });
    const plain = torch.compile(function plain(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) { return r.add(torch.linear(x, w)).mul(2); });
    for (const [rows, seed] of [[1, 1], [3, 2], [40, 3]] as const) {
      const w = rand([72, 48], seed + 10).to(dtype), b = rand([72], seed + 20).to(dtype);
      const x = rand([1, rows, 48], seed), r = rand([1, rows, 72], seed + 30);
      assert.match(graphLog(() => after(x, w, b, r)), /after: 1 kernel calls \(0 dead removed, 1 fused away\)/, `${rows} rows: linear + bias + add is one call`);
      assert.match(graphLog(() => plain(x, w, r)), /plain: 2 kernel calls \(0 dead removed, 1 fused away\)/, `${rows} rows: residual on the left, no bias`);
      const [x2, r2] = [rand([1, rows, 48], seed + 40), rand([1, rows, 72], seed + 50)];
      await close(after(x2, w, b, r2), torch.linear(x2, w, b).add(r2), 1e-5, `linear + bias + residual, ${rows} rows, replayed`);
      await close(plain(x2, w, r2), r2.add(torch.linear(x2, w)).mul(2), 1e-5, `residual + linear, ${rows} rows, replayed`);
    }
  });
}

test("linearAdd on cpu refuses a residual of the wrong size by name", async () => {
  const { native } = await import("../src/devices/cpu/native.js");
  const f32 = (n: number) => new Float32Array(n);
  assert.throws(() => native().linearAdd(f32(4), f32(8), 0, null, 0, f32(1), f32(2), 1, 2, 4, null, 0), /linearAdd.*residual/);
});

for (const dtype of ["float32", "bfloat16"] as const) {
  test(`compile on cpu: a norm, the linears reading it and an MLP's SiLU(gate) * up run as one linearGroup (${dtype} weights), equal to eager`, async () => {
    const qkv = (x: torch.Tensor, g: torch.Tensor, ...ws: torch.Tensor[]) => {
      const h = torch.rmsNorm(x, g, 1e-5, 1);
      return ws.map((w) => torch.linear(h, w));
    };
    const mlp = (x: torch.Tensor, g: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) => {
      const h = torch.rmsNorm(x, g, 1e-6);
      return torch.silu(torch.linear(h, gate)).mul(torch.linear(h, up));
    };
    const four = (x: torch.Tensor, ...ws: torch.Tensor[]) => ws.map((w) => torch.linear(x, w));
    // 1 and 3 rows take the direct GEMV kernels (one job for every weight), 40 rows the packed GEMMs.
    for (const [rows, seed] of [[1, 1], [3, 2], [40, 3]] as const) {
      torch.compiler.reset();
      const fq = torch.compile(qkv), fm = torch.compile(mlp), f4 = torch.compile(four);
      const ws = [200, 72, 72].map((n, i) => rand([n, 64], seed + 10 + i).to(dtype));
      const [g, gate, up] = [rand([64], seed + 20).to(dtype), rand([136, 64], seed + 21).to(dtype), rand([136, 64], seed + 22).to(dtype)];
      const x = rand([1, rows, 64], seed);
      assert.match(graphLog(() => fq(x, g, ...ws)), /qkv: 1 kernel calls \(0 dead removed, 3 fused away\)/, `${rows} rows: norm + q/k/v is one call`);
      assert.match(graphLog(() => fm(x, g, gate, up)), /mlp: 1 kernel calls \(0 dead removed, 4 fused away\)/, `${rows} rows: norm + gate/up + silu * mul is one call`);
      assert.match(graphLog(() => f4(x, ...ws, gate)), /four: 2 kernel calls/, `${rows} rows: four linears are groups of at most three`);
      const x2 = rand([1, rows, 64], seed + 30);
      const got = [...(fq(x2, g, ...ws) as torch.Tensor[]), fm(x2, g, gate, up), ...(f4(x2, ...ws, gate) as torch.Tensor[])];
      const want = [...qkv(x2, g, ...ws), mlp(x2, g, gate, up), ...four(x2, ...ws, gate)];
      for (const [i, t] of got.entries()) await close(t, want[i], 0, `${rows} rows, output ${i}, replayed`);
    }
  });
}

test("compile on cpu: a linear of the group's input traced after other nodes (Qwen3's v after the q/k norms) joins the group", async () => {
  const attn = (x: torch.Tensor, g: torch.Tensor, gq: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor) => {
    const h = torch.rmsNorm(x, g, 1e-6);
    const q = torch.rmsNorm(torch.linear(h, wq).reshape([2, 4, 16]), gq, 1e-6);
    const k = torch.rmsNorm(torch.linear(h, wk).reshape([2, 2, 16]), gq, 1e-6);
    return [q, k, torch.linear(h, wv)];
  };
  torch.compiler.reset();
  const f = torch.compile(attn);
  const args = [rand([2, 48], 1), rand([48], 2), rand([16], 3), rand([64, 48], 4).to("bfloat16"), rand([32, 48], 5).to("bfloat16"), rand([32, 48], 6).to("bfloat16")] as const;
  assert.match(graphLog(() => f(...args)), /attn: 3 kernel calls \(0 dead removed, 3 fused away\)/, "norm + q/k/v, then the q and k norms");
  const x2 = rand([2, 48], 7);
  const got = f(x2, ...args.slice(1) as [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]) as torch.Tensor[];
  const want = attn(x2, ...args.slice(1) as [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]);
  for (const [i, t] of got.entries()) await close(t, want[i], 0, `output ${i}`);
});

test("linearGroup on cpu refuses an output of the wrong size and a malformed epilogue by name", async () => {
  const { native } = await import("../src/devices/cpu/native.js");
  const f32 = (n: number) => new Float32Array(n);
  assert.throws(() => native().linearGroup(f32(4), 1, 4, null, 0, 0, 0, 1, f32(8), 0, 2, f32(1), null, 0, 0, null, null, 0, 0, null, null, 0, null, null, null, 0), /linearGroup.*out/);
  const badStep = new Int32Array([1, 2, 0, 0, 0, 5]); // mul of input 0 and input 5 of a 2-weight group
  assert.throws(() => native().linearGroup(f32(4), 1, 4, null, 0, 0, 0, 2, f32(8), 0, 2, f32(2), f32(8), 0, 2, null, null, 0, 0, null, badStep, 1, null, null, null, 0), /linearGroup: epilogue step 0 is malformed/);
});

test("linearGroup on cpu: the SiLU(gate) * up epilogue of 1-3 rows equals the products then fusedElementwise bit for bit, for column counts that split unevenly over the threads", async () => {
  const { native } = await import("../src/devices/cpu/native.js");
  const n = native();
  const prog = new Int32Array([0, 7, 0, 0, 0, 0, 1, 2, 1, 0, 0, 1]); // silu(in0) * in1
  const K = 64;
  for (const bits of [0, 8, 4]) {
    for (const [M, N, seed] of [[1, 1, 1], [1, 3, 2], [2, 17, 3], [1, 257, 4], [2, 1001, 5], [3, 255, 6]] as const) {
      const x = lcgValues(M * K, seed);
      const weight = (s: number) => {
        const w = lcgValues(N * K, s);
        if (!bits) return { w, s: null };
        const q = new Uint8Array((N * K * bits) / 8), sc = new Float32Array((N * K) / 32);
        n.quantizeBlocks(w, 0, bits, q, sc, N, K);
        return { w: q, s: sc };
      };
      const g = weight(seed + 10), u = weight(seed + 20);
      const fused = new Float32Array(M * N), pg = new Float32Array(M * N), pu = new Float32Array(M * N), want = new Float32Array(M * N);
      n.linearGroup(x, M, K, null, 0, 0, 0, 2, g.w, 0, N, fused, u.w, 0, N, null, null, 0, 0, null, prog, 2, g.s, u.s, null, bits);
      n.linearGroup(x, M, K, null, 0, 0, 0, 2, g.w, 0, N, pg, u.w, 0, N, pu, null, 0, 0, null, null, 0, g.s, u.s, null, bits);
      n.fusedElementwise(prog, 2, 2, pg, [N, 1], pu, [N, 1], null, [], null, [], null, [], null, [], want, [M, N]);
      assert.deepEqual(fused, want, `bits ${bits}, ${M} rows, N = ${N}`);
    }
  }
});
