/** Conformance cases: unary and binary elementwise ops, logical ops, where, maskedFill. */
import * as T from "../../tensor/ops.js";
import type { DType } from "../../tensor/dtype.js";
import type { Tensor } from "../../tensor/tensor.js";
import { flushF32 } from "../flush.js";
import { exact, floats, input, Rng, ulps, type Case, type Expected, type Input } from "../case.js";
import { at, broadcastShape, cast, castTensor, cpow, EXACT, host, num, numel, UNARY_REF, unravel, type HostTensor, type Tolerance, type Value } from "../reference.js";

/** Float32 edge values: signed zeros, denormals, extremes, infinities, NaN. */
export const EDGE = [0, -0, 1, -1, 0.5, -2.5, 3, 1e-40, -1e-40, 1.4e-45, 1e-30, 3e38, -3e38, 1e30, -1e10, 88, -88, 100, -100, Infinity, -Infinity, NaN].map(Math.fround);

type UnaryName = keyof typeof UNARY_REF;

/**
 * x / y as a device that flushes subnormals may compute it (../flush.ts): WGSL bounds the error of
 * x / y only for |y| in [2^-126, 2^126]; beyond, NVIDIA computes x · (1 / y) with 1 / y subnormal,
 * flushed (100 / 3e38 = 0 there).
 */
function flushedDiv(a: number, b: number): number {
  return Math.abs(b) > 2 ** 126 && Number.isFinite(b) ? a * flushF32(Math.fround(1 / b)) : a / b;
}

/** Per-op tolerance and the magnitude its error scales with (x: input, y: exact result). */
const UNARY_TOL: Record<UnaryName, { ulps: number; mag?: (x: number, y: number) => number; atol?: number }> = {
  neg: { ulps: 0 }, abs: { ulps: 0 }, relu: { ulps: 0 },
  square: { ulps: 1 }, sqrt: { ulps: 1 }, rsqrt: { ulps: 3 }, reciprocal: { ulps: 3 },
  exp: { ulps: 4 }, log: { ulps: 4 }, tanh: { ulps: 4 }, sigmoid: { ulps: 4 }, silu: { ulps: 4 }, erf: { ulps: 4 },
  softplus: { ulps: 4 },
  // 0.5 * x * (1 + erf(..)) cancels for negative x: the error scales with |x|.
  gelu: { ulps: 4, mag: (x, y) => Math.abs(y) + 0.5 * Math.abs(x) },
  geluTanh: { ulps: 4, mag: (x, y) => Math.abs(y) + 0.5 * Math.abs(x) },
  // Argument reduction: an absolute error of a few float32 ulps of 1.
  sin: { ulps: 4, atol: 2 ** -24 }, cos: { ulps: 4, atol: 2 ** -24 },
};

/** Trig functions are checked for |x| <= 1e4 (argument reduction in float32). */
const TRIG_LIMIT = 1e4;

function unaryCase(op: UnaryName, name: string, inp: Input): Case {
  const x = inp.t;
  if (op === "neg" && (x.dtype === "int32" || x.dtype === "int64")) {
    // Integer negation stays integer (x * -1, wrapping).
    const values = x.values.map((v) => (x.dtype === "int64" ? BigInt.asIntN(64, -BigInt(v)) : Number(BigInt.asIntN(32, -BigInt(v)))));
    return { op, name, inputs: [inp], run: ([a]) => T.neg(a), expect: [{ dtype: x.dtype, shape: x.shape, values }], tol: EXACT };
  }
  const outDtype: DType = x.dtype === "float16" || x.dtype === "bfloat16" ? x.dtype : "float32";
  const t = UNARY_TOL[op];
  const tol: Tolerance = t.ulps === 0 ? EXACT : ulps(t.ulps, outDtype, t.atol);
  const expect = (f: (x: number) => number) => ([u]: HostTensor[]): Expected[] => {
    const xs = u.values.map((v) => num(cast(v, u.dtype, "float32")));
    const ys = xs.map(f);
    return [floats(outDtype, u.shape, ys, t.mag ? xs.map((v, i) => t.mag!(v, ys[i])) : undefined)];
  };
  const fn = (T as unknown as Record<string, (x: Tensor) => Tensor>)[op];
  return { op, name, inputs: [inp], run: ([a]) => fn(a), expect: expect(UNARY_REF[op])([x]), tol, reference: expect(UNARY_STAGED[op] ?? UNARY_REF[op]) };
}

/**
 * Unary ops as a device that flushes float32 subnormals may compute them (../flush.ts): silu(x) =
 * x / (1 + e^-x) divides by more than 2^126 for x < -87.3 (flushedDiv: silu(-88) = 0 on NVIDIA).
 */
const UNARY_STAGED: Partial<Record<UnaryName, (x: number) => number>> = {
  silu: (x) => flushedDiv(x, Math.fround(1 + Math.exp(-x))),
};

function unaryCases(rng: Rng): Case[] {
  const cases: Case[] = [];
  for (const op of Object.keys(UNARY_REF) as UnaryName[]) {
    const trig = op === "sin" || op === "cos";
    const edge = trig ? [...EDGE.filter((v) => !(Math.abs(v) > TRIG_LIMIT)), TRIG_LIMIT, -1234.5, 0.7853982] : EDGE;
    cases.push(
      unaryCase(op, "float32 edge values", input(host("float32", [edge.length], edge))),
      unaryCase(op, "float32 [5, 7] transposed view", input(rng.tensor([5, 7], -6, 6), "transposed")),
      unaryCase(op, "float32 [2, 3, 4] strided view", input(rng.tensor([2, 3, 4], -20, 20), "strided")),
      unaryCase(op, "float32 [2, 3] at an element offset", input(rng.tensor([2, 3]), "offset")),
      unaryCase(op, "float32 0-d", input(rng.tensor([]))),
      unaryCase(op, "float32 empty [2, 0]", input(host("float32", [2, 0], []))),
      unaryCase(op, "float16 (computed in float32)", input(rng.tensor([9], -4, 4, "float16"))),
      unaryCase(op, "bfloat16 (computed in float32)", input(rng.tensor([4, 3], -4, 4, "bfloat16"), "transposed")),
      unaryCase(op, op === "neg" ? "int64 (stays int64)" : "int64 -> float32", input(rng.ints([7], -5, 6))),
    );
  }
  return cases;
}

// ------------------------------------------------------------------ binary

type BinaryName = "add" | "sub" | "mul" | "div" | "pow" | "maximum" | "minimum" | "eq" | "ne" | "lt" | "le" | "gt" | "ge";
const COMPARISONS = new Set<BinaryName>(["eq", "ne", "lt", "le", "gt", "ge"]);

function promote(a: DType, b: DType): DType {
  if (a === b) return a;
  const rank: Record<DType, number> = { bool: 0, int32: 1, int64: 2, float16: 3, bfloat16: 3, float32: 4 };
  if (rank[a] === 3 && rank[b] === 3) return "float32";
  return rank[a] >= rank[b] ? a : b;
}

function floatOp(op: BinaryName, a: number, b: number): number | boolean {
  switch (op) {
    case "add": return a + b;
    case "sub": return a - b;
    case "mul": return a * b;
    case "div": return a / b;
    case "pow": return cpow(a, b);
    case "maximum": return Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b);
    case "minimum": return Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b);
    case "eq": return a === b;
    case "ne": return a !== b;
    case "lt": return a < b;
    case "le": return a <= b;
    case "gt": return a > b;
    case "ge": return a >= b;
  }
}

function intOp(op: BinaryName, a: bigint, b: bigint): bigint | boolean {
  switch (op) {
    case "add": return a + b;
    case "sub": return a - b;
    case "mul": return a * b;
    case "maximum": return a > b ? a : b;
    case "minimum": return a < b ? a : b;
    case "eq": return a === b;
    case "ne": return a !== b;
    case "lt": return a < b;
    case "le": return a <= b;
    case "gt": return a > b;
    case "ge": return a >= b;
    default: throw new Error(`intOp: ${op}`);
  }
}

/**
 * Reference of a tensor-tensor binary op with the front-end's promotion rules (`flushing`: as a
 * device that flushes float32 subnormals computes it, see flushedDiv).
 */
function binaryExpect(op: BinaryName, a: HostTensor, b: HostTensor, flushing = false): { expect: Expected; tol: Tolerance } {
  let dtype = promote(a.dtype, b.dtype);
  if (op === "div" && (dtype === "int32" || dtype === "int64" || dtype === "bool")) dtype = "float32";
  if (dtype === "bool" && !COMPARISONS.has(op)) dtype = "int64";
  const shape = broadcastShape(a.shape, b.shape);
  const ca = castTensor(a, dtype), cb = castTensor(b, dtype);
  const compute: DType = dtype === "float16" || dtype === "bfloat16" ? "float32" : dtype;
  const outDtype: DType = COMPARISONS.has(op) ? "bool" : dtype;
  const values: Value[] = [], mag: number[] = [];
  for (let i = 0; i < numel(shape); i++) {
    const idx = unravel(i, shape);
    const x = at(ca, idx), y = at(cb, idx);
    let r: number | bigint | boolean;
    if (compute === "int32" || compute === "int64" || compute === "bool") {
      r = intOp(op, BigInt(x), BigInt(y));
      if (typeof r === "bigint") r = compute === "int32" ? Number(BigInt.asIntN(32, r)) : BigInt.asIntN(64, r);
    } else {
      r = flushing && op === "div" ? flushedDiv(num(x), num(y)) : floatOp(op, num(x), num(y));
      if (op === "pow") mag.push(Math.abs(r as number) * (1 + Math.abs(num(y) * Math.log(Math.abs(num(x))))));
    }
    values.push(typeof r === "boolean" ? (r ? 1 : 0) : r);
  }
  const expect = outDtype === "float32" || outDtype === "float16" || outDtype === "bfloat16"
    ? floats(outDtype, shape, values as number[], op === "pow" ? mag : undefined)
    : { dtype: outDtype, shape, values };
  const tol = op === "pow" ? ulps(4, outDtype) : op === "div" ? ulps(3, outDtype) : EXACT;
  return { expect, tol };
}

const BINARY_FNS: Record<BinaryName, (a: Tensor | number, b: Tensor | number) => Tensor> = {
  add: T.add, sub: T.sub, mul: T.mul, div: T.div, pow: T.pow, maximum: T.maximum, minimum: T.minimum,
  eq: T.eq, ne: T.ne, lt: T.lt, le: T.le, gt: T.gt, ge: T.ge,
};

function binaryCase(op: BinaryName, name: string, a: Input, b: Input): Case {
  const { expect, tol } = binaryExpect(op, a.t, b.t);
  return { op, name, inputs: [a, b], run: ([x, y]) => BINARY_FNS[op](x, y), expect: [expect], tol, reference: ([x, y]) => [binaryExpect(op, x, y, true).expect] };
}

/** `tensor op scalar`: the scalar becomes a 0-d tensor of the tensor's dtype (float32 for a fraction with ints). */
function scalarCase(op: BinaryName, name: string, a: Input, s: number): Case {
  const sd: DType = a.t.dtype === "float32" || a.t.dtype === "float16" || a.t.dtype === "bfloat16" ? a.t.dtype
    : Number.isInteger(s) && a.t.dtype !== "bool" ? a.t.dtype : "float32";
  const scalar = host(sd, [], [cast(s, "float32", sd)]);
  const { expect, tol } = binaryExpect(op, a.t, scalar);
  return { op, name, inputs: [a], run: ([x]) => BINARY_FNS[op](x, s), expect: [expect], tol, reference: ([x]) => [binaryExpect(op, x, scalar, true).expect] };
}

const INT32_EDGE = [0, 1, -1, 7, -7, 2147483647, -2147483648, 65536, 3];
const INT64_EDGE = [0n, 1n, -1n, 7n, -7n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 32n, 4294967295n, 3n];

function binaryCases(rng: Rng): Case[] {
  const cases: Case[] = [];
  const ops = Object.keys(BINARY_FNS) as BinaryName[];
  const n = EDGE.length;
  for (const op of ops) {
    const intOk = op !== "pow";
    cases.push(
      binaryCase(op, "float32 edge x edge (broadcast [n,1] x [1,n])", input(host("float32", [n, 1], EDGE)), input(host("float32", [1, n], EDGE))),
      binaryCase(op, "float32 [3,1,5] x [4,5] transposed", input(rng.tensor([3, 1, 5], 0.25, 4)), input(rng.tensor([4, 5], -2, 2), "transposed")),
      binaryCase(op, "float32 strided x offset views", input(rng.tensor([2, 6], 0.5, 3), "strided"), input(rng.tensor([2, 6], -3, 3), "offset")),
      binaryCase(op, "float32 0-d x [3]", input(rng.tensor([], 0.5, 2)), input(rng.tensor([3]))),
      binaryCase(op, "float32 empty [0, 3] x [3]", input(host("float32", [0, 3], [])), input(rng.tensor([3]))),
      binaryCase(op, "float16 x float16 (computed in float32)", input(rng.tensor([6], 0.5, 4, "float16")), input(rng.tensor([6], -2, 2, "float16"))),
      binaryCase(op, "bfloat16 x float16 -> float32", input(rng.tensor([5], 0.5, 4, "bfloat16")), input(rng.tensor([5], -2, 2, "float16"))),
      binaryCase(op, "int32 x float32 -> float32", input(rng.ints([4], -5, 6, "int32")), input(rng.tensor([4], 0.5, 3))),
      scalarCase(op, "float32 tensor op 2.5", input(rng.tensor([2, 3], 0.25, 3), "transposed"), 2.5),
    );
    if (intOk) {
      cases.push(
        binaryCase(op, "int32 edge x edge (wrapping)", input(host("int32", [INT32_EDGE.length, 1], INT32_EDGE)), input(host("int32", [1, INT32_EDGE.length], INT32_EDGE))),
        binaryCase(op, "int64 edge x edge (wrapping)", input(host("int64", [INT64_EDGE.length, 1], INT64_EDGE)), input(host("int64", [1, INT64_EDGE.length], INT64_EDGE), "offset")),
        binaryCase(op, "int32 x int64 -> int64", input(rng.ints([3, 4], -50, 50, "int32"), "transposed"), input(rng.ints([4], -50, 50))),
        binaryCase(op, "bool x bool", input(host("bool", [4], [0, 1, 0, 1])), input(host("bool", [4], [0, 0, 1, 1]))),
        scalarCase(op, "int64 tensor op 3", input(rng.ints([5], -9, 9), "strided"), 3),
      );
    } else {
      cases.push({ op, name: "int64 pow is rejected (TypeError)", inputs: [input(rng.ints([3], 1, 4))], run: ([x]) => T.pow(x, x), expect: { throws: "TypeError" }, tol: EXACT });
    }
  }
  return cases;
}

// ------------------------------------------------------------------ logical, where, maskedFill

function logicalCases(rng: Rng): Case[] {
  const a = host("float32", [6], [0, -0, 1, NaN, -2, 0]);
  const b = host("int64", [6], [0n, 5n, 0n, 1n, -1n, 0n]);
  const truth = (t: HostTensor) => t.values.map((v) => num(cast(v, t.dtype, "bool")));
  const ta = truth(a), tb = truth(b);
  const bools = (vs: number[]) => exact(host("bool", [6], vs));
  const cases: Case[] = [
    { op: "logicalAnd", name: "float32 x int64 truthiness", inputs: [input(a), input(b)], run: ([x, y]) => T.logicalAnd(x, y), expect: [bools(ta.map((v, i) => v & tb[i]))], tol: EXACT },
    { op: "logicalOr", name: "float32 x int64 truthiness", inputs: [input(a), input(b)], run: ([x, y]) => T.logicalOr(x, y), expect: [bools(ta.map((v, i) => v | tb[i]))], tol: EXACT },
    { op: "logicalNot", name: "float32 truthiness (NaN is true)", inputs: [input(a)], run: ([x]) => T.logicalNot(x), expect: [bools(ta.map((v) => 1 - v))], tol: EXACT },
  ];
  const m = rng.ints([3, 5], 0, 2, "bool");
  const mv = m.values.map(Number);
  cases.push(
    { op: "logicalAnd", name: "bool [3,5] transposed x [5] broadcast", inputs: [input(m, "transposed"), input(host("bool", [5], [1, 0, 1, 1, 0]))], run: ([x, y]) => T.logicalAnd(x, y), expect: [exact(host("bool", [3, 5], mv.map((v, i) => v & [1, 0, 1, 1, 0][i % 5])))], tol: EXACT },
    { op: "logicalOr", name: "bool strided x bool offset", inputs: [input(m, "strided"), input(m, "offset")], run: ([x, y]) => T.logicalOr(x, y), expect: [exact(m)], tol: EXACT },
    { op: "logicalNot", name: "empty [0]", inputs: [input(host("bool", [0], []))], run: ([x]) => T.logicalNot(x), expect: [exact(host("bool", [0], []))], tol: EXACT },
  );
  return cases;
}

/** Reference of where(cond, a, b) with broadcasting and promotion. */
function whereExpect(c: HostTensor, a: HostTensor, b: HostTensor): Expected {
  const dtype = promote(a.dtype, b.dtype);
  const shape = broadcastShape(c.shape, broadcastShape(a.shape, b.shape));
  const ca = castTensor(a, dtype), cb = castTensor(b, dtype), cc = castTensor(c, "bool");
  const values = Array.from({ length: numel(shape) }, (_, i) => {
    const idx = unravel(i, shape);
    return num(at(cc, idx)) ? at(ca, idx) : at(cb, idx);
  });
  return { dtype, shape, values };
}

function whereCases(rng: Rng): Case[] {
  const cond = rng.ints([3, 4], 0, 2, "bool");
  const cases: Case[] = [];
  const add = (name: string, c: Input, a: Input, b: Input) =>
    cases.push({ op: "where", name, inputs: [c, a, b], run: ([x, y, z]) => T.where(x, y, z), expect: [whereExpect(c.t, a.t, b.t)], tol: EXACT });
  add("float32 [3,4] with [4] and [3,1]", input(cond), input(rng.tensor([4])), input(rng.tensor([3, 1])));
  add("float32 edge values, transposed condition", input(cond, "transposed"), input(host("float32", [3, 4], EDGE.slice(0, 12))), input(host("float32", [3, 4], EDGE.slice(10, 22))));
  add("int64 x int32 -> int64, strided", input(cond, "strided"), input(host("int64", [4], INT64_EDGE.slice(4, 8))), input(rng.ints([3, 4], -9, 9, "int32"), "offset"));
  add("bool values", input(cond), input(host("bool", [4], [1, 1, 0, 0])), input(host("bool", [3, 1], [0, 1, 1])));
  add("float16 values (exact)", input(cond), input(rng.tensor([3, 4], -2, 2, "float16")), input(rng.tensor([4], -2, 2, "float16")));
  add("condition from float32 (nonzero is true)", input(host("float32", [4], [0, -0, NaN, 2])), input(rng.tensor([4])), input(rng.tensor([4])));
  add("empty [0, 4]", input(host("bool", [0, 4], [])), input(rng.tensor([4])), input(rng.tensor([4])));
  const x = rng.tensor([2, 5]);
  const mask = rng.ints([5], 0, 2, "bool");
  const filled = (v: number) => ({ dtype: "float32" as DType, shape: [2, 5], values: x.values.map((xv, i) => (num(mask.values[i % 5]) ? Math.fround(v) : xv)) });
  cases.push(
    { op: "maskedFill", name: "float32 with -inf, broadcast mask", inputs: [input(x), input(mask)], run: ([a, m]) => T.maskedFill(a, m, -Infinity), expect: [filled(-Infinity)], tol: EXACT },
    { op: "maskedFill", name: "float32 transposed with 0.1", inputs: [input(x, "transposed"), input(mask)], run: ([a, m]) => T.maskedFill(a, m, 0.1), expect: [filled(0.1)], tol: EXACT },
  );
  const xi = rng.ints([5], -9, 9);
  cases.push({
    op: "maskedFill", name: "int64 with -1", inputs: [input(xi, "strided"), input(mask)], run: ([a, m]) => T.maskedFill(a, m, -1),
    expect: [{ dtype: "int64", shape: [5], values: xi.values.map((v, i) => (num(mask.values[i]) ? -1n : v)) }], tol: EXACT,
  });
  return cases;
}

export function elementwiseCases(): Case[] {
  const rng = new Rng(1);
  return [...unaryCases(rng), ...binaryCases(rng), ...logicalCases(rng), ...whereCases(rng)];
}
