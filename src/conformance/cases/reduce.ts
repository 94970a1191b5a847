/** Conformance cases: reductions, cumsum, softmax / log-softmax, sort, topk. */
import * as T from "../../tensor/ops.js";
import type { DType } from "../../tensor/dtype.js";
import type { Tensor } from "../../tensor/tensor.js";
import { floats, input, Rng, ulps, type Case, type Expected, type Input } from "../case.js";
import { cast, EXACT, host, num, numel, stridesOf, type HostTensor, type Value } from "../reference.js";
import { EDGE } from "./elementwise.js";

type ReduceName = "sum" | "mean" | "max" | "min" | "prod" | "argmax" | "argmin";

/**
 * Split `t` into lines along `dim`: for every output position, the values along dim (as the
 * compute dtype) and the output shape with dim removed.
 */
function lines(t: HostTensor, dim: number, compute: DType): { lines: Value[][]; outShape: number[] } {
  const d = dim < 0 ? dim + t.shape.length : dim;
  const outShape = t.shape.filter((_, i) => i !== d);
  const st = stridesOf(t.shape);
  const n = t.shape[d];
  const result: Value[][] = [];
  for (let o = 0; o < numel(outShape); o++) {
    let rem = o, base = 0;
    for (let i = t.shape.length - 1; i >= 0; i--) {
      if (i === d) continue;
      base += (rem % t.shape[i]) * st[i];
      rem = Math.floor(rem / t.shape[i]);
    }
    result.push(Array.from({ length: n }, (_, j) => cast(t.values[base + j * st[d]], t.dtype, compute)));
  }
  return { lines: result, outShape };
}

/** First NaN, else first extremum (the cpu's rule). */
function argExtreme(xs: Value[], max: boolean): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) {
    const b = xs[best], x = xs[i];
    if (typeof b === "number" && Number.isNaN(b)) break;
    if (typeof x === "number" && Number.isNaN(x)) return i;
    if (max ? x > b : x < b) best = i;
  }
  return best;
}

function reduceExpect(op: ReduceName, t: HostTensor, dim: number | undefined, keepdim: boolean): Expected {
  const flat = dim === undefined;
  const src = flat ? host(t.dtype, [numel(t.shape)], t.values) : t;
  const isFloat = t.dtype === "float32" || t.dtype === "float16" || t.dtype === "bfloat16";
  const compute: DType = t.dtype === "bool" ? "int64" : isFloat ? "float32" : t.dtype;
  const d = flat ? 0 : dim < 0 ? dim + t.shape.length : dim;
  const { lines: ls, outShape } = lines(src, d, compute);
  const isArg = op === "argmax" || op === "argmin";
  let dtype: DType = isArg ? "int64" : isFloat ? "float32" : op === "sum" || op === "prod" ? "int64" : op === "mean" ? "float32" : compute;
  if (!isArg && (t.dtype === "float16" || t.dtype === "bfloat16")) dtype = t.dtype;
  const values: Value[] = [], mag: number[] = [];
  for (const xs of ls) {
    // Integer means are taken over the values converted to float32, as the front-end does.
    const f = xs.map((v) => num(op === "mean" ? cast(v, compute, "float32") : v));
    switch (op) {
      case "sum":
      case "mean":
        if (compute === "float32" || op === "mean") {
          const s = f.reduce((a, b) => a + b, 0), m = f.reduce((a, b) => a + Math.abs(b), 0);
          values.push(op === "mean" ? s / f.length : s);
          mag.push(op === "mean" ? m / f.length : m);
        } else {
          values.push(BigInt.asIntN(64, (xs as bigint[]).reduce((a, b) => a + BigInt(b), 0n)));
        }
        break;
      case "prod":
        if (compute === "float32") {
          const p = f.reduce((a, b) => a * b, 1);
          values.push(p);
          mag.push(Math.abs(p) * Math.max(1, f.length));
        } else {
          values.push(BigInt.asIntN(64, xs.reduce<bigint>((a, b) => a * BigInt(b), 1n)));
        }
        break;
      case "max":
      case "min":
        values.push(xs[argExtreme(xs, op === "max")]);
        break;
      default:
        values.push(BigInt(argExtreme(xs, op === "argmax")));
    }
  }
  const shape = keepdim ? (flat ? t.shape.map(() => 1) : t.shape.map((s, i) => (i === d ? 1 : s))) : flat ? [] : outShape;
  if (dtype === "float32" || dtype === "float16" || dtype === "bfloat16") {
    return floats(dtype, shape, values.map(num), op === "max" || op === "min" ? undefined : mag);
  }
  return { dtype, shape, values };
}

const REDUCE_FNS: Record<ReduceName, (x: Tensor, dim?: number, keepdim?: boolean) => Tensor> = {
  sum: T.sum, mean: T.mean, max: T.max, min: T.min, prod: T.prod, argmax: T.argmax, argmin: T.argmin,
};

function reduceCase(op: ReduceName, name: string, x: Input, dim?: number, keepdim = false): Case {
  const expect = reduceExpect(op, x.t, dim, keepdim);
  const tol = op === "prod" ? ulps(2, expect.dtype) : op === "sum" || op === "mean" ? ulps(4, expect.dtype) : EXACT;
  return { op, name, inputs: [x], run: ([a]) => REDUCE_FNS[op](a, dim, keepdim), expect: [expect], tol, reference: ([u]) => [reduceExpect(op, u, dim, keepdim)] };
}

function reduceCases(rng: Rng): Case[] {
  const cases: Case[] = [];
  for (const op of Object.keys(REDUCE_FNS) as ReduceName[]) {
    const edgeRows = host("float32", [2, 11], EDGE);
    cases.push(
      reduceCase(op, "float32 [4, 9] last dim", input(rng.tensor([4, 9])), -1),
      reduceCase(op, "float32 [4, 9] dim 0, keepdim", input(rng.tensor([4, 9]), "transposed"), 0, true),
      reduceCase(op, "float32 [2, 3, 4] dim 1, strided view", input(rng.tensor([2, 3, 4]), "strided"), 1),
      reduceCase(op, "float32 all elements", input(rng.tensor([3, 5], 0.5, 1.5), "offset")),
      reduceCase(op, "float32 all elements, keepdim", input(rng.tensor([2, 2], 0.5, 1.5)), undefined, true),
      reduceCase(op, "float32 edge values (NaN, inf, denormals)", input(edgeRows), 1),
      reduceCase(op, "float32 NaN-free edge values", input(host("float32", [8], [0, -0, 1e-40, -3e38, 3e38, Infinity, -1, 2])), 0),
      reduceCase(op, "float32 ties", input(host("float32", [6], [2, -1, 2, -1, 0, 2])), 0),
      reduceCase(op, "float32 1000 elements with cancellation", input(rng.tensor([1000], -1e3, 1e3)), 0),
      reduceCase(op, "float32 size-1 dim", input(rng.tensor([3, 1])), 1),
      reduceCase(op, "int32 (sums in int64)", input(host("int32", [2, 3], [2147483647, 2147483647, 5, -2147483648, -1, 7])), 1),
      reduceCase(op, "int64 wrapping", input(host("int64", [4], [2n ** 62n, 2n ** 62n, 3n, -5n])), 0),
      reduceCase(op, "bool (as int64)", input(host("bool", [2, 3], [1, 0, 1, 1, 1, 0]), "transposed"), 0),
      reduceCase(op, "float16 (computed in float32)", input(rng.tensor([3, 4], -2, 2, "float16")), 1),
    );
    if (op === "sum" || op === "prod") {
      cases.push(reduceCase(op, "empty dim", input(host("float32", [2, 0], [])), 1));
    } else {
      cases.push({ op, name: "empty dim is rejected (RangeError)", inputs: [input(host("float32", [2, 0], []))], run: ([x]) => REDUCE_FNS[op](x, 1), expect: { throws: "RangeError" }, tol: EXACT });
    }
  }
  return cases;
}

// ------------------------------------------------------------------ cumsum

function cumsumCase(name: string, x: Input, dim: number): Case {
  const isFloat = x.t.dtype === "float32" || x.t.dtype === "float16" || x.t.dtype === "bfloat16";
  const tol = isFloat ? ulps(4, x.t.dtype === "float32" ? "float32" : x.t.dtype) : EXACT;
  return { op: "cumsum", name, inputs: [x], run: ([a]) => T.cumsum(a, dim), expect: [cumsumExpect(x.t, dim)], tol, reference: ([u]) => [cumsumExpect(u, dim)] };
}

function cumsumExpect(t: HostTensor, dim: number): Expected {
  const isFloat = t.dtype === "float32" || t.dtype === "float16" || t.dtype === "bfloat16";
  const compute: DType = isFloat ? "float32" : "int64";
  const d = dim < 0 ? dim + t.shape.length : dim;
  const st = stridesOf(t.shape);
  const values = new Array<Value>(t.values.length), mag = new Array<number>(t.values.length);
  for (let i = 0; i < t.values.length; i++) {
    const pos = Math.floor(i / st[d]) % t.shape[d];
    if (pos !== 0) continue;
    let s = 0, m = 0, si = 0n;
    for (let j = 0; j < t.shape[d]; j++) {
      const k = i + j * st[d];
      const v = cast(t.values[k], t.dtype, compute);
      if (compute === "int64") values[k] = (si = BigInt.asIntN(64, si + (v as bigint)));
      else { s += v as number; m += Math.abs(v as number); values[k] = s; mag[k] = m; }
    }
  }
  const dtype: DType = isFloat ? (t.dtype === "float32" ? "float32" : t.dtype) : "int64";
  return isFloat ? floats(dtype, t.shape, values as number[], mag) : { dtype, shape: t.shape, values };
}

function cumsumCases(rng: Rng): Case[] {
  return [
    cumsumCase("float32 [3, 50] last dim", input(rng.tensor([3, 50])), 1),
    cumsumCase("float32 [6, 4] dim 0, transposed", input(rng.tensor([6, 4]), "transposed"), 0),
    cumsumCase("float32 300 elements", input(rng.tensor([300], -100, 100), "strided"), 0),
    cumsumCase("float32 edge values", input(host("float32", [EDGE.length], EDGE)), 0),
    cumsumCase("int64 wrapping", input(host("int64", [4], [2n ** 62n, 2n ** 62n, 2n ** 62n, 5n])), 0),
    cumsumCase("int32 -> int64", input(rng.ints([2, 5], -9, 9, "int32"), "offset"), 1),
    cumsumCase("bool -> int64", input(host("bool", [5], [1, 0, 1, 1, 0])), 0),
    cumsumCase("float16 (computed in float32)", input(rng.tensor([7], -2, 2, "float16")), 0),
    cumsumCase("empty", input(host("float32", [0, 3], [])), 0),
  ];
}

// ------------------------------------------------------------------ softmax

function softmaxCase(name: string, x: Input, dim: number, log: boolean): Case {
  const dtype: DType = x.t.dtype === "float16" || x.t.dtype === "bfloat16" ? x.t.dtype : "float32";
  const op = log ? "logSoftmax" : "softmax";
  return { op, name, inputs: [x], run: ([a]) => (log ? T.logSoftmax : T.softmax)(a, dim), expect: [softmaxExpect(x.t, dim, log)], tol: ulps(4, dtype), reference: ([u]) => [softmaxExpect(u, dim, log)] };
}

function softmaxExpect(t: HostTensor, dim: number, log: boolean): Expected {
  const isFloat = t.dtype === "float32" || t.dtype === "float16" || t.dtype === "bfloat16";
  const dtype: DType = isFloat ? t.dtype : "float32";
  const d = dim < 0 ? dim + t.shape.length : dim;
  const st = stridesOf(t.shape);
  const values = new Array<number>(t.values.length), mag = new Array<number>(t.values.length);
  for (let i = 0; i < t.values.length; i++) {
    if (Math.floor(i / st[d]) % t.shape[d] !== 0) continue;
    const idx = Array.from({ length: t.shape[d] }, (_, j) => i + j * st[d]);
    const xs = idx.map((k) => num(cast(t.values[k], t.dtype, "float32")));
    // The cpu's algorithm: max ignores NaN; a row of -inf gives 0 / -inf.
    const m = xs.reduce((a, b) => (b > a ? b : a), -Infinity);
    if (m === -Infinity) {
      idx.forEach((k) => { values[k] = log ? -Infinity : 0; mag[k] = 0; });
      continue;
    }
    const s = xs.reduce((a, b) => a + Math.exp(b - m), 0);
    const lse = Math.log(s);
    idx.forEach((k, j) => {
      const z = xs[j] - m;
      values[k] = log ? z - lse : Math.exp(z) / s;
      mag[k] = log ? Math.abs(z) + Math.abs(lse) + 1 : (Math.exp(z) / s) * (1 + Math.abs(z));
    });
  }
  return floats(dtype, t.shape, values, mag);
}

function softmaxCases(rng: Rng): Case[] {
  const cases: Case[] = [];
  const special = host("float32", [5, 4], [
    0, -Infinity, 1, 2,
    -Infinity, -Infinity, -Infinity, -Infinity,
    1, NaN, 2, 3,
    Infinity, 0, 1, 2,
    1e30, -1e30, 3e38, -3e38,
  ]);
  for (const log of [false, true]) {
    cases.push(
      softmaxCase("float32 [4, 10] last dim", input(rng.tensor([4, 10], -5, 5)), -1, log),
      softmaxCase("float32 [6, 3] dim 0, transposed", input(rng.tensor([6, 3], -5, 5), "transposed"), 0, log),
      softmaxCase("float32 300 wide rows", input(rng.tensor([2, 300], -20, 20), "strided"), 1, log),
      softmaxCase("float32 -inf, all -inf, NaN, +inf, huge rows", input(special), 1, log),
      softmaxCase("float16 (computed in float32)", input(rng.tensor([2, 5], -3, 3, "float16")), 1, log),
      softmaxCase("int64 -> float32", input(rng.ints([2, 3], -3, 3), "offset"), 1, log),
      softmaxCase("size-1 dim", input(rng.tensor([3, 1])), 1, log),
      softmaxCase("empty", input(host("float32", [0, 4], [])), 1, log),
    );
  }
  return cases;
}

// ------------------------------------------------------------------ sort, topk

/** NaN above every number; stable. Returns the permutation of one line. */
function order(xs: number[], descending: boolean): number[] {
  const above = (a: number, b: number) => (Number.isNaN(a) || Number.isNaN(b) ? Number.isNaN(a) && !Number.isNaN(b) : a > b);
  return xs.map((_, i) => i).sort((i, j) => {
    const [a, b] = descending ? [xs[i], xs[j]] : [xs[j], xs[i]];
    return above(a, b) ? -1 : above(b, a) ? 1 : i - j;
  });
}

function sortLike(op: "sort" | "topk", name: string, x: Input, dim: number, descending: boolean, k?: number): Case {
  const t = x.t;
  const d = dim < 0 ? dim + t.shape.length : dim;
  const st = stridesOf(t.shape);
  const n = t.shape[d];
  const kk = k ?? n;
  const shape = t.shape.map((s, i) => (i === d ? kk : s));
  const ost = stridesOf(shape);
  const values = new Array<number>(numel(shape)), indices = new Array<bigint>(numel(shape));
  for (let i = 0; i < t.values.length; i++) {
    if (Math.floor(i / st[d]) % n !== 0) continue;
    const xs = Array.from({ length: n }, (_, j) => num(cast(t.values[i + j * st[d]], t.dtype, "float32")));
    const o = order(xs, descending);
    const base = Math.floor(i / (st[d] * n)) * ost[d] * kk + (i % st[d]);
    for (let j = 0; j < kk; j++) {
      values[base + j * ost[d]] = xs[o[j]];
      indices[base + j * ost[d]] = BigInt(o[j]);
    }
  }
  const run = op === "sort"
    ? ([a]: Tensor[]) => { const r = T.sort(a, dim, descending); return [r.values, r.indices]; }
    : ([a]: Tensor[]) => { const r = T.topk(a, kk); return [r.values, r.indices]; };
  return { op, name, inputs: [x], run, expect: [floats("float32", shape, values), { dtype: "int64", shape, values: indices }], tol: EXACT };
}

function sortCases(rng: Rng): Case[] {
  const ties = host("float32", [2, 9], [3, 1, NaN, 1, -0, 0, 3, -Infinity, NaN, 2, 2, 2, 1, 1, 1, Infinity, 0, 2]);
  const cases: Case[] = [];
  for (const descending of [false, true]) {
    const dir = descending ? "descending" : "ascending";
    cases.push(
      sortLike("sort", `${dir} float32 [3, 20]`, input(rng.tensor([3, 20])), -1, descending),
      sortLike("sort", `${dir} stable with ties and NaN`, input(ties), 1, descending),
      sortLike("sort", `${dir} dim 0, transposed`, input(rng.tensor([5, 3]), "transposed"), 0, descending),
      sortLike("sort", `${dir} 300 elements (not a power of two)`, input(rng.tensor([300], -1e4, 1e4), "strided"), 0, descending),
    );
  }
  cases.push(
    sortLike("sort", "int64 -> float32 values", input(rng.ints([7], -5, 5), "offset"), 0, false),
    sortLike("sort", "float16 -> float32 values", input(rng.tensor([6], -2, 2, "float16")), 0, true),
    sortLike("sort", "size-1", input(host("float32", [1], [4])), 0, false),
    sortLike("sort", "empty", input(host("float32", [2, 0], [])), 1, false),
    sortLike("topk", "k=3 of [4, 10]", input(rng.tensor([4, 10])), -1, true, 3),
    sortLike("topk", "ties by lower index and NaN first", input(ties), 1, true, 5),
    sortLike("topk", "k = n, transposed", input(rng.tensor([3, 6]), "transposed"), 1, true, 6),
    sortLike("topk", "k = 0", input(rng.tensor([2, 5])), 1, true, 0),
    sortLike("topk", "k=5 of 1000", input(rng.tensor([1000], -1, 1)), 0, true, 5),
    { op: "topk", name: "k > n is rejected (RangeError)", inputs: [input(rng.tensor([3]))], run: ([a]) => T.topk(a, 4).values, expect: { throws: "RangeError" }, tol: EXACT },
  );
  return cases;
}

export function reduceFamilyCases(): Case[] {
  const rng = new Rng(2);
  return [...reduceCases(rng), ...cumsumCases(rng), ...softmaxCases(rng), ...sortCases(rng)];
}
