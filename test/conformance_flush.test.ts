/**
 * The conformance suite's subnormal-flush rule (src/conformance/flush.ts), on the host: results of
 * a device that flushes float32 subnormals (as NVIDIA's Vulkan driver does under WGSL's permission)
 * pass where the device declares Device.flushesSubnormals = "may", and only there; results that
 * equal neither the exact nor a flushed reference still fail; copies stay bit-exact.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Case } from "../src/conformance/case.js";
import { flushedInputSets, flushF32, flushedRatio, MIN_NORMAL_F32 } from "../src/conformance/flush.js";
import { EXACT, host, num, type Value } from "../src/conformance/reference.js";
import { allCases, compareOutputs, type Output } from "../src/conformance/runner.js";

const f = Math.fround;
const cases = allCases();

function find(op: string, name: string): Case {
  const c = cases.find((x) => x.op === op && x.name === name);
  assert.ok(c, `no case ${op}: ${name}`);
  return c;
}

/** The case's exact reference outputs with `edit` applied to output 0 (as a device would return them). */
function outputs(c: Case, edit: (values: Value[]) => Value[]): Output[] {
  assert.ok(Array.isArray(c.expect));
  return c.expect.map((e, k) => ({ dtype: e.dtype, shape: e.shape, values: k === 0 ? edit([...e.values]) : e.values }));
}

/** What a flushing device computes for a unary op on the edge values, from `fn` (float32 stages). */
function unaryFtz(c: Case, fn: (x: number) => number): Output[] {
  const xs = c.inputs[0].t.values.map((v) => flushF32(v as number));
  return outputs(c, () => xs.map((x) => flushF32(f(fn(x)))));
}

/** What a flushing device computes for a binary edge x edge case (inputs and result flushed). */
function binaryFtz(c: Case, fn: (a: number, b: number) => number | boolean): Output[] {
  const a = c.inputs[0].t.values.map((v) => flushF32(v as number)), b = c.inputs[1].t.values.map((v) => flushF32(v as number));
  return outputs(c, () => a.flatMap((x) => b.map((y) => {
    const r = fn(x, y);
    return typeof r === "boolean" ? (r ? 1 : 0) : flushF32(f(r));
  })));
}

const EDGE_BINARY = "float32 edge x edge (broadcast [n,1] x [1,n])";

/** Division as NVIDIA's driver computes it: a · rcp(b), the reciprocal flushed when subnormal. */
const rcpDiv = (a: number, b: number) => a * flushF32(f(1 / b));

test("flush rule: helpers flush float32 subnormals to sign-preserving zero, every input combination", () => {
  assert.ok(Object.is(flushF32(f(-1e-40)), -0) && flushF32(f(1e-40)) === 0 && flushF32(MIN_NORMAL_F32) === MIN_NORMAL_F32);
  const a = host("float32", [2], [f(1e-40), 1]), b = host("float32", [1], [2]), c = host("float32", [1], [f(-1e-40)]);
  const sets = flushedInputSets([a, b, c]);
  assert.equal(sets.length, 4, "2 inputs hold subnormals: 4 combinations");
  assert.deepEqual(sets[0], [a, b, c]);
  assert.ok(sets.every((s) => s[1] === b));
  assert.ok(Object.is(sets[3][2].values[0], -0) && sets[3][0].values[0] === 0);
  // Output flush: 0 stands for a subnormal reference (within tolerance), not for a normal one.
  assert.equal(flushedRatio(0, f(1e-40), EXACT, f(1e-40)), 0);
  assert.equal(flushedRatio(0, 2 * MIN_NORMAL_F32, EXACT, 2 * MIN_NORMAL_F32), Infinity);
  assert.equal(flushedRatio(0, MIN_NORMAL_F32, { rtol: 2 ** -22, atol: 0 }, MIN_NORMAL_F32), 0);
});

test("flush rule: the H200's results (sqrt, rsqrt, silu, arithmetic, comparisons on ±1e-40) pass only with the permission", () => {
  const runs: [Case, Output[]][] = [
    [find("sqrt", "float32 edge values"), unaryFtz(find("sqrt", "float32 edge values"), Math.sqrt)],
    [find("rsqrt", "float32 edge values"), unaryFtz(find("rsqrt", "float32 edge values"), (x) => 1 / Math.sqrt(x))],
    // silu as x / (1 + e^-x) through the reciprocal: 1 / (1 + e^88) = 6e-39 is flushed before the product.
    [find("silu", "float32 edge values"), unaryFtz(find("silu", "float32 edge values"), (x) => rcpDiv(x, f(1 + Math.exp(-x))))],
    [find("add", EDGE_BINARY), binaryFtz(find("add", EDGE_BINARY), (a, b) => a + b)],
    [find("mul", EDGE_BINARY), binaryFtz(find("mul", EDGE_BINARY), (a, b) => a * b)],
    [find("div", EDGE_BINARY), binaryFtz(find("div", EDGE_BINARY), rcpDiv)],
    [find("maximum", EDGE_BINARY), binaryFtz(find("maximum", EDGE_BINARY), (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b)))],
    [find("lt", EDGE_BINARY), binaryFtz(find("lt", EDGE_BINARY), (a, b) => a < b)],
    [find("eq", EDGE_BINARY), binaryFtz(find("eq", EDGE_BINARY), (a, b) => a === b)],
  ];
  for (const [c, got] of runs) {
    assert.equal(compareOutputs(c, got, false).passed, false, `${c.op}: flushed results must fail on an exact-IEEE device`);
    const r = compareOutputs(c, got, true);
    assert.ok(r.passed, `${c.op}: ${r.reason}`);
  }
  // The values the H200 printed: sqrt(1e-40) = 0, rsqrt(1e-40) = inf, 0 / 1e-40 = NaN, 0 ** 1e-40 = 1.
  const sq = find("sqrt", "float32 edge values"), rs = find("rsqrt", "float32 edge values");
  assert.ok(compareOutputs(sq, outputs(sq, (v) => (v[7] = 0, v)), true).passed);
  assert.ok(compareOutputs(rs, outputs(rs, (v) => (v[7] = Infinity, v)), true).passed);
  const div = find("div", EDGE_BINARY), pow = find("pow", EDGE_BINARY);
  assert.ok(compareOutputs(div, outputs(div, (v) => (v[7] = NaN, v)), true).passed);
  assert.ok(compareOutputs(pow, outputs(pow, (v) => (v[7] = 1, v)), true).passed);
});

test("flush rule: a result equal to neither the exact nor a flushed reference still fails", () => {
  const add = find("add", EDGE_BINARY);
  assert.ok(Array.isArray(add.expect));
  const i = add.expect[0].values.findIndex((v) => num(v) === f(1e-40)); // 1e-40 + 0
  assert.ok(i >= 0);
  const half = compareOutputs(add, outputs(add, (v) => (v[i] = f(5e-41), v)), true);
  assert.equal(half.passed, false);
  assert.match(half.reason ?? "", /got 4\.99\d*e-41, expected 9\.99\d*e-41 \(or its subnormal-flushed references\)/);
  // A flushed normal value is no subnormal flush: 3 + 1e-40 must stay 3.
  const j = add.expect[0].values.findIndex((v) => num(v) === 3);
  assert.equal(compareOutputs(add, outputs(add, (v) => (v[j] = 0, v)), true).passed, false);
  // sqrt(1e-40) may be 0 (flushed input) but not 5e-21.
  const sq = find("sqrt", "float32 edge values");
  assert.equal(compareOutputs(sq, outputs(sq, (v) => (v[7] = f(5e-21), v)), true).passed, false);
  // div(0, 1e-40) may be NaN (0 / 0 after the flush) but not 1.
  const div = find("div", EDGE_BINARY);
  assert.equal(compareOutputs(div, outputs(div, (v) => (v[7] = 1, v)), true).passed, false);
});

test("flush rule: copies and casts stay bit-exact on a device that may flush", () => {
  const cast = find("cast", "float32 -> float32");
  assert.equal(cast.reference, undefined, "a copy declares no float arithmetic");
  assert.ok(Array.isArray(cast.expect));
  const i = cast.expect[0].values.findIndex((v) => num(v) === f(1e-40));
  assert.ok(i >= 0);
  assert.equal(compareOutputs(cast, outputs(cast, (v) => (v[i] = 0, v)), true).passed, false);
  const where = find("where", "float32 edge values, transposed condition");
  assert.equal(where.reference, undefined);
  // Every case over float32 subnormal inputs either declares arithmetic or is data movement.
  const withSub = cases.filter((c) => c.inputs.some((x) => x.t.dtype === "float32" && x.t.values.some((v) => typeof v === "number" && v !== 0 && Math.abs(v) < MIN_NORMAL_F32)));
  const movement = withSub.filter((c) => !c.reference).map((c) => c.op);
  assert.deepEqual([...new Set(movement)].sort(), ["cast", "where"]);
});
