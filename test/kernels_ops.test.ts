/**
 * The hub kernels of hub-kernels/ (rmsnorm, silu-and-mul, moe-grouped-gemm), each op on cpu
 * (cpu-wasm) and webgpu (webgpu-wgsl) against tsorch's built-in ops within 1e-4 (the built-ins are
 * tested against transformers), including bfloat16 weights; and the dtype check of signatures.
 */
import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import * as path from "node:path";
import * as T from "../src/index.js";
import { getKernel } from "../src/kernels/index.js";
import { routeTopK } from "../src/nn/moe.js";
import type { Device } from "../src/devices/device.js";
import { ROOT, maxAbsDiff } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { lcgValues } from "./helpers/lcg.js";

const KERNELS = path.join(ROOT, "hub-kernels");

/** A deterministic float32 tensor with values in [-1, 1). */
function rand(shape: number[], seed: number): T.Tensor {
  return T.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });
}

async function close(a: T.Tensor, b: T.Tensor, tol = 1e-4): Promise<void> {
  assert.deepEqual(a.shape, b.shape);
  const d = maxAbsDiff((await a.data()) as Float32Array, (await b.data()) as Float32Array);
  assert.ok(d <= tol, `max |diff| ${d} > ${tol}`);
}

async function onDevices(t: TestContext, fn: (dev: Device | "cpu") => Promise<void>): Promise<void> {
  await t.test("cpu (cpu-wasm)", () => fn("cpu"));
  await t.test("webgpu (webgpu-wgsl)", async (tt) => {
    process.env.XDG_RUNTIME_DIR ??= "/tmp/xdg-runtime";
    const dev = await webgpuOrSkip(tt);
    if (dev) await fn(dev);
  });
}

const on = async (x: T.Tensor, dev: Device | "cpu") => (dev === "cpu" ? x : x.toAsync(dev));

test("rmsnorm: rmsNorm equals the built-in op (float32 and bfloat16 weights, offset 0 and 1)", async (t) => {
  const k = await getKernel(path.join(KERNELS, "rmsnorm"));
  assert.equal(k.name, "rmsnorm");
  await onDevices(t, async (dev) => {
    const x = await on(rand([3, 5, 64], 1), dev);
    for (const dtype of ["float32", "bfloat16"] as const) {
      const w = await on(rand([64], 2).to(dtype), dev);
      for (const offset of [0, 1]) await close(k.rmsNorm(x, w, 1e-6, offset), T.rmsNorm(x, w, 1e-6, offset));
    }
  });
});

test("a dtype the signature excludes throws naming the kernel, the op and the argument", async () => {
  const k = await getKernel(path.join(KERNELS, "rmsnorm"));
  assert.throws(() => k.rmsNorm(rand([2, 8], 1), rand([8], 2).to("float16"), 1e-6),
    /kernel .*rmsnorm: op rmsNorm: weight has dtype float16, but its signature allows float32, bfloat16/);
  assert.throws(() => k.rmsNorm(rand([2, 8], 1), rand([6], 2), 1e-6), /op rmsNorm: weight has shape \[6\], which does not match \[H\] with H=8/);
  assert.throws(() => k.rmsNorm(rand([2, 6], 1), rand([6], 2), 1e-6), /op rmsNorm: arguments break the rule H % 4 == 0/);
});

test("silu-and-mul: siluAndMul equals silu(gate) * up, large magnitudes included", async (t) => {
  const k = await getKernel(path.join(KERNELS, "silu-and-mul"));
  await onDevices(t, async (dev) => {
    const g = await on(T.mul(rand([4, 3, 32], 3), 40), dev), u = await on(rand([4, 3, 32], 4), dev);
    await close(k.siluAndMul(g, u), T.mul(T.silu(g), u));
  });
});

/** The built-in MoE math (nn/moe.ts): each routed row through its expert's gated MLP, weighted, summed. */
function builtinMoe(x: T.Tensor, weights: T.Tensor, ids: T.Tensor, gateUp: T.Tensor, down: T.Tensor): T.Tensor {
  const [Tn, H] = x.shape, K = ids.shape[1], E = gateUp.shape[0], I = down.shape[2];
  const rows = x.unsqueeze(1).expand(Tn, K, H).reshape(Tn * K, H), idx = ids.reshape(Tn * K);
  const g = Array.from({ length: E }, (_, e) => gateUp.select(0, e).narrow(0, 0, I));
  const u = Array.from({ length: E }, (_, e) => gateUp.select(0, e).narrow(0, I, I));
  const d = Array.from({ length: E }, (_, e) => down.select(0, e));
  const h = T.mul(T.silu(T.gatherLinear(rows, g, idx)), T.gatherLinear(rows, u, idx));
  return T.sum(T.mul(T.gatherLinear(h, d, idx).view(Tn, K, H), weights.unsqueeze(2)), 1);
}

test("moe-grouped-gemm: moe equals the built-in experts (ragged groups, an unused expert, bfloat16 weights)", async (t) => {
  const k = await getKernel(path.join(KERNELS, "moe-grouped-gemm"));
  await onDevices(t, async (dev) => {
    // 37 tokens, top-2 of 5 experts; expert 4 never chosen, expert 0 gets more than one 16-row tile.
    const E = 5, H = 64, I = 40, Tn = 37, K = 2;
    const logits = T.add(rand([Tn, E], 5), T.tensor([2, 0, 0, 0, -50]));
    const { weights, indices } = routeTopK(logits, K, true);
    const ids = indices.to("int32");
    for (const dtype of ["float32", "bfloat16"] as const) {
      const gateUp = await on(T.mul(rand([E, 2 * I, H], 6), 0.2).to(dtype), dev), down = await on(T.mul(rand([E, H, I], 7), 0.2).to(dtype), dev);
      const x = await on(rand([Tn, H], 8), dev), w = await on(weights, dev), i = await on(ids, dev);
      // The reference takes float32 copies of the weights (exact for bfloat16): the kernel computes
      // in float32, where the cpu's bfloat16 GEMM rounds activations (test/bf16_gemm.test.ts).
      await close(k.moe(x, w, i, gateUp, down), builtinMoe(x, w, i, gateUp.to("float32"), down.to("float32")));
    }
  });
});

test("webgpu built-in gatherLinear over stacked expert weights (one grouped pass) equals the cpu; a bad index is reported", async (t) => {
  process.env.XDG_RUNTIME_DIR ??= "/tmp/xdg-runtime";
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const E = 6, N = 70, M = 53;
  const idx = T.tensor(Int32Array.from({ length: M }, (_, m) => (m * 7) % 5), { dtype: "int64" }); // expert 5 unused
  const w = (s: T.Tensor) => Array.from({ length: E }, (_, e) => s.select(0, e));
  let sg: T.Tensor | undefined;
  for (const [K, dtype] of [[48, "bfloat16"], [48, "float32"], [12, "float16"]] as const) { // 8 at a time, and element by element
    const stacked = T.mul(rand([E, N, K], 9), 0.3).to(dtype), x = rand([M, K], 10);
    // Against float32 copies of the weights (exact), as the shader computes: the cpu's bfloat16
    // GEMM would round the activations (test/bf16_gemm.test.ts).
    const want = T.gatherLinear(x, w(stacked.to("float32")), idx);
    sg = await stacked.toAsync(dev);
    await close(T.gatherLinear(await x.toAsync(dev), w(sg), await idx.toAsync(dev)), want);
  }
  const K = 12;
  const bad = await T.tensor([0, 7, 1], { dtype: "int64" }).toAsync(dev);
  await assert.rejects(T.gatherLinear(await rand([3, K], 11).toAsync(dev), w(sg!), bad).data(), /7.*out of range|out of range.*7/);
});
