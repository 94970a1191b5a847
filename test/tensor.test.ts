/** The tensor front-end: views, broadcasting, dtypes, reductions, and device/kernel errors. */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as T from "../src/index.js";
import { HostOnlyDevice } from "./helpers/host_only_device.js";

const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol = 1e-6) => {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= tol * (1 + Math.abs(b[i])), `at ${i}: ${a[i]} vs ${b[i]}`);
};
const arr = async (t: T.Tensor) => Array.from(await t.data(), Number);

test("views share storage; contiguous copies only when needed", async () => {
  const x = T.arange(0, 24, 1, { dtype: "float32" }).view(2, 3, 4);
  const t = x.transpose(0, 2);
  assert.deepEqual(t.shape, [4, 3, 2]);
  assert.equal(t.storage, x.storage);
  assert.equal(t.isContiguous, false);
  assert.deepEqual(await t.tolist(), [[[0, 12], [4, 16], [8, 20]], [[1, 13], [5, 17], [9, 21]], [[2, 14], [6, 18], [10, 22]], [[3, 15], [7, 19], [11, 23]]]);
  assert.throws(() => t.view(24), /view size .* not compatible/);
  assert.deepEqual(await arr(t.reshape(24)), [0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23]);
  assert.deepEqual(await arr(x.slice(2, 1, 3)), [1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22]);
  assert.deepEqual(await arr(x.select(1, -1)), [8, 9, 10, 11, 20, 21, 22, 23]);
  assert.deepEqual(await arr(x.slice(2, 0, 4, 2).narrow(0, 1, 1)), [12, 14, 16, 18, 20, 22]);
  assert.deepEqual(x.unsqueeze(1).shape, [2, 1, 3, 4]);
  assert.deepEqual(x.unsqueeze(-1).squeeze().shape, [2, 3, 4]);
  assert.deepEqual(await arr(T.tensor([1, 2, 3]).expand(2, 3)), [1, 2, 3, 1, 2, 3]);
  assert.deepEqual(x.view(6, -1).shape, [6, 4]);
  assert.deepEqual(x.split(2, 2).map((t) => t.shape[2]), [2, 2]);
  assert.deepEqual(x.chunk(2, 1).map((t) => t.shape[1]), [2, 1]);
  assert.throws(() => x.split(0), /split size must be a positive integer/);
  assert.throws(() => x.split(1.5), /split size must be a positive integer/);
  assert.throws(() => x.chunk(-1), /chunk count must be a positive integer/);
  assert.throws(() => x.view(5, -1), /invalid for input of size 24/);
});

test("broadcasting arithmetic, type promotion and comparisons", async () => {
  const a = T.tensor([[1, 2, 3], [4, 5, 6]]);
  const b = T.tensor([10, 20, 30]);
  assert.deepEqual(await arr(T.add(a, b)), [11, 22, 33, 14, 25, 36]);
  assert.deepEqual(await arr(T.mul(a, T.tensor([[2], [3]]))), [2, 4, 6, 12, 15, 18]);
  assert.deepEqual(await arr(T.sub(a.T, 1)), [0, 3, 1, 4, 2, 5]);
  close(await arr(T.div(a, 4)), [0.25, 0.5, 0.75, 1, 1.25, 1.5]);
  const ints = T.tensor([7, -7], { dtype: "int64" });
  assert.equal(T.add(ints, 1).dtype, "int64");
  assert.equal(T.div(ints, 2).dtype, "float32"); // true division, as torch.div
  assert.deepEqual(await arr(T.div(ints, 2)), [3.5, -3.5]);
  const h = T.tensor([1.5, -2.25], { dtype: "bfloat16" });
  assert.equal(T.add(h, h).dtype, "bfloat16");
  assert.deepEqual(await arr(T.add(h, h)), [3, -4.5]);
  assert.equal(T.add(h, T.tensor([1, 1])).dtype, "float32");
  const gt = T.gt(a, 3);
  assert.equal(gt.dtype, "bool");
  assert.deepEqual(await arr(gt), [0, 0, 0, 1, 1, 1]);
  assert.deepEqual(await arr(T.where(gt, a, T.neg(a))), [-1, -2, -3, 4, 5, 6]);
  assert.deepEqual(await arr(a.maskedFill(T.tensor([true, false, true]), 0)), [0, 2, 0, 0, 5, 0]);
  assert.throws(() => T.add(a, T.tensor([1, 2])), /shapes \[2,3\] and \[2\] cannot be broadcast/);
});

test("unary functions match Math within float32 precision", async () => {
  const xs = [-3, -0.5, 0, 0.25, 2];
  const x = T.tensor(xs);
  close(await arr(T.exp(x)), xs.map(Math.exp));
  close(await arr(T.tanh(x)), xs.map(Math.tanh));
  close(await arr(T.silu(x)), xs.map((v) => v / (1 + Math.exp(-v))));
  close(await arr(T.sigmoid(x)), xs.map((v) => 1 / (1 + Math.exp(-v))));
  const geluTanh = (v: number) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
  close(await arr(T.geluTanh(x)), xs.map(geluTanh), 1e-5);
  // erf-based gelu at known points: gelu(1) = 0.8413447460685429, gelu(-0.5) = -0.15426876936299347
  close(await arr(T.gelu(T.tensor([1, -0.5]))), [0.8413447460685429, -0.15426876936299347], 1e-6);
});

test("reductions, softmax, cumsum, sort, topk, cat, matmul", async () => {
  const x = T.tensor([[3, 1, 2], [-1, 5, 5]]);
  assert.deepEqual(await arr(T.sum(x, 1)), [6, 9]);
  assert.deepEqual(await arr(T.mean(x, 0)), [1, 3, 3.5]);
  assert.deepEqual(await arr(T.max(x, -1)), [3, 5]);
  assert.deepEqual(await arr(T.argmax(x, 1)), [0, 1]); // first index on ties, as torch
  assert.equal(await T.sum(x).item(), 15);
  assert.deepEqual(T.sum(x, 1, true).shape, [2, 1]);
  const e = [Math.exp(3), Math.exp(1), Math.exp(2)];
  close(await arr(T.softmax(x, -1).select(0, 0)), e.map((v) => v / (e[0] + e[1] + e[2])));
  close(await arr(T.logSoftmax(x, -1).select(0, 0)), e.map((v) => Math.log(v / (e[0] + e[1] + e[2]))));
  assert.deepEqual(await arr(T.cumsum(x, 1)), [3, 4, 6, -1, 4, 9]);
  assert.deepEqual(await arr(T.cumsum(T.tensor([1, 0, 1], { dtype: "int64" }), 0)), [1, 1, 2]);
  const s = T.sort(x, -1, true);
  assert.deepEqual(await arr(s.values), [3, 2, 1, 5, 5, -1]);
  assert.deepEqual(await arr(s.indices), [0, 2, 1, 1, 2, 0]);
  const k = T.topk(x, 2);
  assert.deepEqual(await arr(k.values), [3, 2, 5, 5]);
  assert.deepEqual(await arr(k.indices), [0, 2, 1, 2]);
  assert.deepEqual(await arr(T.cat([x, T.tensor([[7, 8, 9]])], 0)), [3, 1, 2, -1, 5, 5, 7, 8, 9]);
  assert.deepEqual(await arr(T.cat([x, x.narrow(1, 0, 1)], 1)), [3, 1, 2, 3, -1, 5, 5, -1]);
  const m = T.matmul(x, x.T);
  assert.deepEqual(await arr(m), [14, 12, 12, 51]);
  const batched = T.matmul(T.stack([x, x]), T.tensor([[1], [0], [1]]));
  assert.deepEqual(batched.shape, [2, 2, 1]);
  assert.deepEqual(await arr(batched), [5, 4, 5, 4]);
  assert.throws(() => T.matmul(x, x), /cannot be multiplied/);
});

test("linear with bf16 weights computes in float32; embedding; norms; rotary", async () => {
  const w = T.tensor([[1, 2], [3, 4], [0.5, -1]], { dtype: "bfloat16" });
  const x = T.tensor([[1, 1], [2, -1]]);
  const y = T.linear(x, w, T.tensor([0, 1, 2]));
  assert.equal(y.dtype, "float32");
  assert.deepEqual(await arr(y), [3, 8, 1.5, 0, 3, 4]);
  const ids = T.tensor([2, 0], { dtype: "int64" });
  assert.deepEqual(await arr(T.embedding(ids, w)), [0.5, -1, 1, 2]);
  assert.throws(() => T.embedding(T.tensor([3], { dtype: "int64" }), w), /3/);
  const v = [1, 2, 3, 4];
  const rms = Math.sqrt((1 + 4 + 9 + 16) / 4 + 1e-6);
  close(await arr(T.rmsNorm(T.tensor([v]), T.tensor([1, 1, 2, 2]), 1e-6)), [1 / rms, 2 / rms, 6 / rms, 8 / rms]);
  close(await arr(T.rmsNorm(T.tensor([v]), T.tensor([0, 0, 1, 1]), 1e-6, 1)), [1 / rms, 2 / rms, 6 / rms, 8 / rms]);
  const sd = Math.sqrt(1.25 + 1e-5);
  close(await arr(T.layerNorm(T.tensor([v]), null, null, 1e-5)), [-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd], 1e-5);
  // rotate_half: [x0, x1] -> [x0 cos - x1 sin, x1 cos + x0 sin]
  const c = Math.cos(0.3), s = Math.sin(0.3);
  const r = T.applyRotary(T.tensor([1, 2]).view(1, 1, 1, 2), T.tensor([c, c]).view(1, 1, 2), T.tensor([s, s]).view(1, 1, 2));
  close(await arr(r), [c - 2 * s, 2 * c + s]);
});

test("scaled_dot_product_attention matches a direct computation (GQA, causal)", async () => {
  const B = 1, Hq = 2, Hkv = 1, L = 3, D = 2;
  const qv = [0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, 0.3, 0.2];
  const kv = [0.2, -0.1, 0.4, 0.3, -0.5, 0.6];
  const vv = [1, 2, 3, 4, 5, 6];
  const q = T.tensor(qv).view(B, Hq, L, D), k = T.tensor(kv).view(B, Hkv, L, D), v = T.tensor(vv).view(B, Hkv, L, D);
  const out = T.scaledDotProductAttention(q, k, v, { isCausal: true });
  assert.deepEqual(out.shape, [B, Hq, L, D]);
  const expected: number[] = [];
  for (let h = 0; h < Hq; h++) {
    for (let i = 0; i < L; i++) {
      const scores = [];
      for (let j = 0; j <= i; j++) scores.push((qv[(h * L + i) * D] * kv[j * D] + qv[(h * L + i) * D + 1] * kv[j * D + 1]) / Math.sqrt(D));
      const m = Math.max(...scores), e = scores.map((s) => Math.exp(s - m)), z = e.reduce((a, b) => a + b);
      for (let d = 0; d < D; d++) expected.push(e.reduce((acc, p, j) => acc + (p / z) * vv[j * D + d], 0));
    }
  }
  close(await arr(out), expected, 1e-6);
});

test("an op on two devices names both; an op with no kernel names op and device", async () => {
  T.registerDevice("hostonly", { synchronous: true, open: () => new HostOnlyDevice() });
  const a = T.tensor([1, 2]);
  const b = a.to("hostonly");
  assert.equal(b.device.name, "hostonly");
  assert.throws(() => T.add(a, b), /expected all tensors to be on the same device, but found at least two devices, cpu and hostonly/);
  assert.throws(() => T.add(b, b), /op 'binary' has no kernel on device 'hostonly'/);
  assert.deepEqual(await arr(b.to("cpu")), [1, 2]);
  assert.throws(() => T.registerKernel("copy", "cpu", () => {}), /already registered/);
  assert.throws(() => T.tensor([1]).to("nosuchdevice"), /unknown device 'nosuchdevice'; available: cpu/);
});
