/**
 * The linear-argmax fusion's tie, NaN and kept-logits checks, shared by the cpu and webgpu
 * compile tests: a greedy head compiled must pick eager's id (the first maximum, else the first
 * NaN), and a head whose logits are also returned stays a linear plus an argmax.
 */
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Device } from "../../src/devices/device.js";
import { lcgValues } from "./lcg.js";

const ids = async (t: torch.Tensor) => Array.from(await t.data(), Number);

/**
 * On `device`, with a [2, 16] input against an [N, 16] weight: columns `ties` are one weight row
 * (equal, largest logits: the first wins); rows `nans` hold a NaN (the first wins).
 * `kernelCalls(f)` counts the kernel calls f makes.
 */
export async function checkArgmaxTiesAndNaN(device: string | Device, N: number, ties: number[], nans: [number, number],
  kernelCalls: (f: () => void) => number): Promise<void> {
  const bare = (x: torch.Tensor, w: torch.Tensor) => torch.argmax(torch.linear(x, w), -1);
  const [M, K] = [2, 16];
  const wv = lcgValues(N * K, 40).map((v) => v * 0.1);
  for (const c of ties) wv.set(Array.from({ length: K }, () => 1), c * K);
  const w = torch.tensor(wv, { shape: [N, K], device });
  const x = torch.tensor(new Float32Array(M * K).fill(0.5), { shape: [M, K], device });
  torch.compiler.reset();
  const fb = torch.compile(bare);
  fb(x, w);
  assert.deepEqual(await ids(fb(x, w) as torch.Tensor), [ties[0], ties[0]], "ties: the first maximum");
  // NaN weight rows: their logits are NaN, and argmax returns the first NaN as eager does.
  const nan = wv.slice();
  nan[nans[0] * K + 3] = NaN;
  nan[nans[1] * K] = NaN;
  const wn = torch.tensor(nan, { shape: [N, K], device });
  assert.deepEqual(await ids(fb(x, wn) as torch.Tensor), await ids(bare(x, wn)), "NaN logits: eager's pick");
  assert.deepEqual(await ids(fb(x, wn) as torch.Tensor), [nans[0], nans[0]], "NaN logits: the first NaN");
  // Logits also returned: the linear and the argmax stay two kernels.
  const both = (x: torch.Tensor, w: torch.Tensor) => {
    const logits = torch.linear(x, w);
    return [logits, torch.argmax(logits, -1)];
  };
  torch.compiler.reset();
  const f2 = torch.compile(both);
  assert.equal(kernelCalls(() => f2(x, w)), 2, "logits returned: linear + argmax");
  const [l2, i2] = f2(x, wn) as torch.Tensor[];
  assert.deepEqual(await ids(i2), [nans[0], nans[0]]);
  assert.equal(l2.shape.join(), `${M},${N}`);
}
