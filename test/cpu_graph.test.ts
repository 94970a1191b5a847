/**
 * The cpu graph backend (src/devices/cpu/graph.ts, native/graph.cc): a replay whose calls all have
 * a native graph form is one JS->native call; an export kept out of the native graph still runs,
 * through the per-call fallback between native segments; both equal eager. No timing.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as torch from "../src/index.js";
import { cpuGraphTesting } from "../src/devices/cpu/graph.js";
import { native } from "../src/devices/cpu/native.js";
import { maxAbsDiff } from "./helpers/shared.js";
import { lcgValues } from "./helpers/lcg.js";

function rand(shape: number[], seed: number): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape });
}

/** linear, rms-style normalisation, softmax, a reduction and elementwise ops. */
function block(x: torch.Tensor, w: torch.Tensor): torch.Tensor {
  const h = torch.linear(x, w);
  const n = h.mul(torch.rsqrt(h.mul(h).mean(-1, true).add(1e-6)));
  return torch.softmax(torch.silu(n).mul(2), -1).add(torch.sum(n, -1, true));
}

async function replayMatchesEager(): Promise<number> {
  const f = torch.compile(function cpuGraphBlock(x: torch.Tensor, w: torch.Tensor) { return block(x, w); });
  const w = rand([16, 8], 1);
  f(rand([3, 8], 2), w);
  const x = rand([3, 8], 3);
  const before = cpuGraphTesting.nativeCalls;
  const got = f(x, w);
  const calls = cpuGraphTesting.nativeCalls - before;
  assert.equal(torch.compiler.stats().cacheHits, 1, "the second call replays the graph");
  const d = maxAbsDiff(Array.from(await got.data(), Number), Array.from(await block(x, w).data(), Number));
  assert.ok(d <= 1e-5, `max |compiled - eager| = ${d}`);
  return calls;
}

test("cpu graph: a replay whose calls are all covered is one native call", async () => {
  torch.compiler.reset();
  assert.equal(await replayMatchesEager(), 1);
});

test("cpu graph: an uncovered export runs through the per-call fallback and still equals eager", async () => {
  torch.compiler.reset();
  cpuGraphTesting.uncovered.add("linear");
  try {
    // [native segment? none before linear] linear from JS, then the rest as one native segment.
    assert.equal(await replayMatchesEager(), 2);
  } finally {
    cpuGraphTesting.uncovered.delete("linear");
  }
});

test("cpu graph: graphCreate and graphRun refuse bad input with a clear error", () => {
  const addon = native();
  assert.throws(() => addon.graphCreate(["noSuchKernel"], [[]], []), /no graph form for export 'noSuchKernel'/);
  assert.throws(() => addon.graphCreate(["copy"], [[{}]], []), /argument 0 of node 0 must be null, a number, a TypedArray/);
  const g = addon.graphCreate(["copy"], [[new Uint8Array(4)]], [[0, 0, 0, 0, 4]]);
  assert.throws(() => addon.graphRun(g, [new Uint8Array(2)]), /slot 0 is missing or smaller/);
  assert.throws(() => addon.graphRun(g, [new Uint8Array(4)]), /tsorch_cpu.copy: expects \d+ arguments, got 1/);
});
