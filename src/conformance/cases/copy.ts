/** Conformance cases: dtype conversion (every pair), contiguous, in-place copy into views, cat, stack. */
import * as T from "../../tensor/ops.js";
import { DTYPES, type DType } from "../../tensor/dtype.js";
import type { Tensor } from "../../tensor/tensor.js";
import { exact, input, Rng, type Case, type Input } from "../case.js";
import { castTensor, EXACT, host, numel, roundFloat, unravel, type HostTensor, type Value } from "../reference.js";

/** Values that exercise each conversion: rounding, overflow, saturation, NaN, subnormals. */
const CAST_EDGE: Record<DType, Value[]> = {
  float32: [0, -0, 1.5, -1.5, 2.5, -2.5, 0.1, 65504, 65505, 65520, 70000, 1e-5, 6e-8, 3e-8, 1e-40, 3.4e38, -3.4e38,
    2147483520, 2147483648, -2147483904, 9.3e18, -9.3e18, 1e10, Infinity, -Infinity, NaN, 0.3, 1.0000001].map(Math.fround),
  float16: [0, -0, 1, -1.5, 65504, -65504, 6.1e-5, 5.96e-8, 0.1, Infinity, -Infinity, NaN, 1000.5, 3.5].map((v) => roundFloat(v, "float16")),
  bfloat16: [0, 1, -2.5, 3.39e38, 1e-38, 9.2e-41, Infinity, NaN, 257, 1e10, -7.5].map((v) => roundFloat(v, "bfloat16")),
  int32: [0, 1, -1, 7, 2147483647, -2147483648, 65536, 16777217, -16777217, 65505, 300],
  int64: [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 32n, 4294967295n, 2n ** 53n + 1n, 2n ** 31n, -(2n ** 31n) - 1n, 16777217n, 2n ** 24n + 3n, 70000n],
  bool: [0, 1, 1, 0],
};

function castCases(): Case[] {
  const cases: Case[] = [];
  for (const from of DTYPES) {
    for (const to of DTYPES) {
      const t = host(from, [CAST_EDGE[from].length], CAST_EDGE[from]);
      cases.push({ op: "cast", name: `${from} -> ${to}`, inputs: [input(t)], run: ([x]) => x.to(to), expect: [exact(castTensor(t, to))], tol: EXACT });
    }
  }
  const rng = new Rng(3);
  const m = rng.tensor([3, 5], -1e5, 1e5);
  cases.push(
    { op: "cast", name: "float32 transposed view -> float16", inputs: [input(m, "transposed")], run: ([x]) => x.to("float16"), expect: [exact(castTensor(m, "float16"))], tol: EXACT },
    { op: "cast", name: "float32 strided view -> int32", inputs: [input(m, "strided")], run: ([x]) => x.to("int32"), expect: [exact(castTensor(m, "int32"))], tol: EXACT },
    { op: "cast", name: "bfloat16 offset view -> float32", inputs: [input(castTensor(m, "bfloat16"), "offset")], run: ([x]) => x.to("float32"), expect: [exact(castTensor(castTensor(m, "bfloat16"), "float32"))], tol: EXACT },
    { op: "cast", name: "empty float32 -> int64", inputs: [input(host("float32", [0, 2], []))], run: ([x]) => x.to("int64"), expect: [exact(host("int64", [0, 2], []))], tol: EXACT },
  );
  return cases;
}

function contiguousCases(): Case[] {
  const rng = new Rng(4);
  const cases: Case[] = [];
  for (const dtype of DTYPES) {
    const t = dtype === "int64" || dtype === "int32" ? rng.ints([3, 5], -1000, 1000, dtype) : dtype === "bool" ? rng.ints([3, 5], 0, 2, "bool") : rng.tensor([3, 5], -5, 5, dtype);
    for (const view of ["transposed", "strided", "offset"] as const) {
      cases.push({ op: "contiguous", name: `${dtype} ${view} view`, inputs: [input(t, view)], run: ([x]) => x.contiguous(), expect: [exact(t)], tol: EXACT });
    }
  }
  const row = rng.tensor([1, 4]);
  cases.push({
    op: "contiguous", name: "float32 expanded [1,4] -> [3,4] (stride 0)", inputs: [input(row)], run: ([x]) => x.expand(3, 4).contiguous(),
    expect: [exact(host("float32", [3, 4], [...row.values, ...row.values, ...row.values]))], tol: EXACT,
  });
  const b = rng.ints([2, 1, 3], 0, 2, "bool");
  cases.push({
    op: "contiguous", name: "bool permuted and expanded", inputs: [input(b)], run: ([x]) => x.permute(2, 0, 1).expand(3, 2, 2).contiguous(),
    expect: [exact(host("bool", [3, 2, 2], Array.from({ length: 12 }, (_, i) => { const [k, j] = unravel(i, [3, 2, 2]); return b.values[j * 3 + k]; })))], tol: EXACT,
  });
  return cases;
}

/** copyInto(src, view of dst): the whole of dst afterwards, with `region` (flat indices of the view) overwritten. */
function copyIntoCase(name: string, src: Input, dst: HostTensor, view: (d: Tensor) => Tensor, region: number[]): Case {
  const converted = castTensor(src.t, dst.dtype);
  const values = [...dst.values];
  region.forEach((flat, i) => { values[flat] = converted.values[i % converted.values.length]; });
  return {
    op: "copyInto", name, inputs: [src, input(dst)],
    run: ([s, d]) => { T.copyInto(s, view(d)); return d; },
    expect: [exact(host(dst.dtype, dst.shape, values))], tol: EXACT,
  };
}

function copyIntoCases(): Case[] {
  const rng = new Rng(5);
  const cols = (rows: number, width: number, start: number, n: number) => Array.from({ length: rows * n }, (_, i) => Math.floor(i / n) * width + start + (i % n));
  const base = rng.tensor([2, 4]);
  const shifted = [...base.values];
  for (let r = 0; r < 2; r++) [shifted[r * 4 + 2], shifted[r * 4 + 3]] = [shifted[r * 4], shifted[r * 4 + 1]];
  return [
    copyIntoCase("float32 transposed src into columns 1..2 of [3, 4]", input(rng.tensor([3, 2]), "transposed"), rng.tensor([3, 4]), (d) => d.narrow(1, 1, 2), cols(3, 4, 1, 2)),
    copyIntoCase("float32 -> float16 at odd element offsets", input(rng.tensor([3, 3])), rng.tensor([3, 5], -1, 1, "float16"), (d) => d.narrow(1, 1, 3), cols(3, 5, 1, 3)),
    copyIntoCase("int64 -> bool into a strided row", input(host("int64", [3], [0n, 5n, -1n])), host("bool", [7], [0, 1, 0, 1, 0, 1, 0]), (d) => d.slice(0, 1, 7, 2), [1, 3, 5]),
    copyIntoCase("broadcast [3] into [2, 3] of bfloat16", input(rng.tensor([3])), rng.tensor([2, 3], -1, 1, "bfloat16"), (d) => d, [0, 1, 2, 3, 4, 5]),
    copyIntoCase("float32 into the transpose of [2, 3]", input(rng.tensor([3, 2])), rng.tensor([2, 3]), (d) => d.transpose(0, 1), [0, 3, 1, 4, 2, 5]),
    {
      op: "copyInto", name: "between two views of one buffer", inputs: [input(base)],
      run: ([d]) => { T.copyInto(d.narrow(1, 0, 2), d.narrow(1, 2, 2)); return d; },
      expect: [exact(host("float32", [2, 4], shifted))], tol: EXACT,
    },
  ];
}

/** Reference of cat along `dim` with dtype promotion. */
function catExpect(ts: HostTensor[], dim: number, dtype: DType): HostTensor {
  const d = dim < 0 ? dim + ts[0].shape.length : dim;
  const shape = [...ts[0].shape];
  shape[d] = ts.reduce((s, t) => s + t.shape[d], 0);
  const values = new Array<Value>(numel(shape));
  for (let i = 0; i < values.length; i++) {
    const idx = unravel(i, shape);
    let k = 0, pos = idx[d];
    while (pos >= ts[k].shape[d]) pos -= ts[k++].shape[d];
    const src = castTensor(ts[k], dtype);
    const j = idx.reduce((acc, v, a) => acc * src.shape[a] + (a === d ? pos : v), 0);
    values[i] = src.values[j];
  }
  return host(dtype, shape, values);
}

function catCases(): Case[] {
  const rng = new Rng(6);
  const cases: Case[] = [];
  const add = (name: string, inputs: Input[], dim: number, dtype: DType) =>
    cases.push({ op: "cat", name, inputs, run: (xs) => T.cat(xs, dim), expect: [exact(catExpect(inputs.map((i) => i.t), dim, dtype))], tol: EXACT });
  add("float32 [2,3] + [2,5] dim 1, views", [input(rng.tensor([2, 3]), "transposed"), input(rng.tensor([2, 5]), "strided")], 1, "float32");
  add("int32 + float16 -> float16", [input(rng.ints([2, 2], -9, 9, "int32")), input(rng.tensor([1, 2], -2, 2, "float16"))], 0, "float16");
  add("bool [3] + [0] + [5] (sub-word, unaligned)", [input(rng.ints([3], 0, 2, "bool")), input(host("bool", [0], [])), input(rng.ints([5], 0, 2, "bool"), "offset")], 0, "bool");
  add("float16 [2,3] + [2,3] dim 1 (sub-word, strided)", [input(rng.tensor([2, 3], -2, 2, "float16")), input(rng.tensor([2, 3], -2, 2, "float16"), "transposed")], 1, "float16");
  add("int64 dim -1", [input(rng.ints([2, 1], -9, 9)), input(host("int64", [2, 2], [2n ** 40n, -3n, 5n, -(2n ** 63n)]))], -1, "int64");
  add("single tensor", [input(rng.tensor([3]))], 0, "float32");
  const a = rng.tensor([2, 3]), b = rng.tensor([2, 3]), c = rng.tensor([2, 3]);
  const stacked = (ts: HostTensor[], dim: number, dtype: DType) => catExpect(ts.map((t) => host(t.dtype, [...t.shape.slice(0, dim), 1, ...t.shape.slice(dim)], t.values)), dim, dtype);
  cases.push(
    { op: "stack", name: "float32 three [2,3] at dim 1", inputs: [input(a), input(b, "transposed"), input(c, "offset")], run: (xs) => T.stack(xs, 1), expect: [exact(stacked([a, b, c], 1, "float32"))], tol: EXACT },
    { op: "stack", name: "bfloat16 at dim 0", inputs: [input(castTensor(a, "bfloat16")), input(castTensor(b, "bfloat16"))], run: (xs) => T.stack(xs, 0), expect: [exact(stacked([castTensor(a, "bfloat16"), castTensor(b, "bfloat16")], 0, "bfloat16"))], tol: EXACT },
    { op: "stack", name: "int64 0-d tensors", inputs: [input(host("int64", [], [3n])), input(host("int64", [], [-4n]))], run: (xs) => T.stack(xs, 0), expect: [exact(host("int64", [2], [3n, -4n]))], tol: EXACT },
  );
  return cases;
}

export function copyCases(): Case[] {
  return [...castCases(), ...contiguousCases(), ...copyIntoCases(), ...catCases()];
}
