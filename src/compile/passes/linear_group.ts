/**
 * Linear grouping: adjacent `linear` nodes (no bias, float32) that read the same input view become
 * `linearGroup` kernel calls of up to three weights (devices/kernels.ts), one dispatch instead of
 * one per linear (attention's q/k/v projections, an MLP's gate and up projections); and an
 * `rmsNorm` whose result only those linears read, right before them, is computed inside the
 * group (the norm as the matrix-vector kernel's prologue; a decoder layer's two input norms and
 * the final norm before the LM head). When the next node is an elementwise chain (or one unary or
 * binary op) of exactly the group's products, each read only there, and the weights have one
 * shape, the chain becomes the group's epilogue (an MLP's SiLU(gate) * up). A linear of the same
 * input that follows a few nodes later is moved up to join the group first when no node in
 * between writes its input or weight or touches its output (Qwen3's v projection, traced after
 * the q/k norms that read q and k). Block-quantized linears (`linearQuantized`, and the
 * `linearQuantizedGroup` eager already makes of q/k/v and gate/up) group the same way into
 * `linearGroupQuantized`, all weights of one group of one bits. Runs only on devices that register
 * `linearGroup` (float weights) or `linearGroupQuantized` (quantized ones), after the other fusions
 * (which move an MLP's activation past its up projection).
 */
import type { Storage } from "../../devices/device.js";
import { FUSABLE_BINARY, type BinaryOp, type FusedStep, type LinearGroupNorm, type QuantizedWeight, type UnaryOp } from "../../devices/kernels.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { readerCounts } from "./readers.js";

/** Most weights of one group (each weight and output is a storage binding). */
const MAX_WEIGHTS = 3;

/** A contiguous float32 view of `numel` elements. */
const dense = (v: TensorView, n: number) => isContiguous(v) && numel(v) === n && v.dtype === "float32";

/** One linear of a node: input, weight (a float view or a quantized weight), the weight's storages,
 * its rows, output, and kind (0: float, else the quantized bits; a group holds one kind). */
interface Lin { x: TensorView; w: TensorView | QuantizedWeight; storages: Storage[]; N: number; out: TensorView; kind: number }

/** Which weight kinds group (the device's registered linearGroup forms). */
export interface WeightKinds { float?: boolean; quantized?: boolean }

/** The linears of node `n` when they can join a group (2-D float32 input, no bias), else null: a
 * `linear` (the weight of any float dtype: a device's kernel runs what it cannot fuse, e.g. webgpu's
 * half-precision weights, as the separate ops), a `linearQuantized`, or each weight of a
 * `linearQuantizedGroup`. */
function linearsOf(n: GraphNode | undefined, kinds: WeightKinds): Lin[] | null {
  const ok = (x: TensorView, out: TensorView, N: number) => x.shape.length === 2 && dense(x, x.shape[0] * x.shape[1]) && dense(out, x.shape[0] * N);
  if (n?.op === "linear" && kinds.float) {
    const [x, w, bias, out] = n.args as [TensorView, TensorView, TensorView | null, TensorView];
    return bias === null && ok(x, out, w.shape[0]) ? [{ x, w, storages: [w.storage], N: w.shape[0], out, kind: 0 }] : null;
  }
  if (n?.op === "linearQuantized" && kinds.quantized) {
    const [x, q, scales, bits, bias, out] = n.args as [TensorView, TensorView, TensorView, 4 | 8, TensorView | null, TensorView];
    return bias === null && ok(x, out, q.shape[0]) ? [{ x, w: { q, scales, bits }, storages: [q.storage, scales.storage], N: q.shape[0], out, kind: bits }] : null;
  }
  if (n?.op === "linearQuantizedGroup" && kinds.quantized) {
    const [x, qs, scales, biases, bits, outs] = n.args as [TensorView, TensorView[], TensorView[], (TensorView | null)[], 4 | 8, TensorView[]];
    const lins = qs.map((q, i) => ({ x, w: { q, scales: scales[i], bits }, storages: [q.storage, scales[i].storage], N: q.shape[0], out: outs[i], kind: bits }));
    return biases.every((b) => b === null) && lins.every((l) => ok(x, l.out, l.N)) ? lins : null;
  }
  return null;
}

const sameView = (a: TensorView, b: TensorView) =>
  a.storage === b.storage && a.offset === b.offset && `${a.shape}` === `${b.shape}` && `${a.strides}` === `${b.strides}`;

/** A node's elementwise chain over its inputs, or null when it is none (float32 only). */
function chainOf(n: GraphNode | undefined): { steps: readonly FusedStep[]; inputs: TensorView[]; out: TensorView } | null {
  if (n?.op === "fusedElementwise") {
    const [steps, inputs, out] = n.args as [FusedStep[], TensorView[], TensorView];
    return { steps, inputs, out };
  }
  if (n?.op === "unary") {
    const [op, x, out] = n.args as [UnaryOp, TensorView, TensorView];
    return x.dtype === "float32" && out.dtype === "float32" ? { steps: [{ op, args: [{ input: 0 }] }], inputs: [x], out } : null;
  }
  if (n?.op === "binary") {
    const [op, a, b, out] = n.args as [BinaryOp, TensorView, TensorView, TensorView];
    const ok = FUSABLE_BINARY.has(op) && [a, b, out].every((v) => v.dtype === "float32");
    return ok ? { steps: [{ op, args: [{ input: 0 }, { input: 1 }] }], inputs: [a, b], out } : null;
  }
  return null;
}

/** How many nodes past the end of a run of linears a linear of the same input is looked for. */
const LOOKAHEAD = 8;

/**
 * `nodes` with each linear that reads the input view of an earlier adjacent run of linears moved
 * to the end of that run, when it is at most LOOKAHEAD nodes past it and no node in between writes
 * its input or weight, or reads or writes its output (so moving it changes no value).
 */
function gatherLinears(nodes: readonly GraphNode[], kinds: WeightKinds): GraphNode[] {
  const out = [...nodes];
  const input = (n: GraphNode | undefined) => linearsOf(n, kinds)?.[0].x;
  for (let i = 0; i < out.length; i++) {
    const x = input(out[i]);
    if (!x) continue;
    let end = i + 1;
    while (end < out.length && input(out[end]) && sameView(input(out[end])!, x)) end++;
    for (let j = end; j < Math.min(out.length, end + LOOKAHEAD); j++) {
      const b = linearsOf(out[j], kinds);
      if (!b || !sameView(b[0].x, x)) continue;
      const touched = [x.storage, ...b.flatMap((l) => [...l.storages, l.out.storage])];
      const safe = out.slice(end, j).every((n) => !n.writes.some((s) => touched.includes(s)) && !b.some((l) => n.reads.includes(l.out.storage)));
      if (!safe) continue;
      const [moved] = out.splice(j, 1);
      out.splice(end++, 0, moved);
    }
    i = end - 1;
  }
  return out;
}

/** The nodes with linear groups formed (see the file comment); `temporary`: storages that die with
 * the call; `kinds`: which weight kinds group (the device's registered forms). */
export function groupLinears(all: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>,
  kinds: WeightKinds = { float: true }): GraphNode[] {
  const nodes = gatherLinears(all, kinds);
  const readers = readerCounts(nodes);
  const out: GraphNode[] = [];
  /** `next` as the epilogue of `group` (its chain's steps reading product i as input i, and its output), or null. */
  const epilogue = (x: TensorView, norm: LinearGroupNorm | null, group: Lin[], next: GraphNode | undefined) => {
    const chain = chainOf(next);
    if (!chain || group.length > MAX_WEIGHTS || group.some((a) => a.N !== group[0].N)) return null;
    const M = x.shape[0], N = group[0].N;
    const products = group.map((a) => a.out);
    const index = chain.inputs.map((v) => products.findIndex((p) => p.storage === v.storage && p.offset === v.offset && dense(v, M * N)));
    const ok = index.every((k) => k >= 0) && products.every((p, k) => index.includes(k) && temporary.has(p.storage) && !outputs.has(p.storage) && readers.get(p.storage) === 1)
      && dense(chain.out, M * N) && ![x.storage, norm?.weight.storage, ...group.flatMap((a) => a.storages)].includes(chain.out.storage);
    if (!ok) return null;
    const steps = chain.steps.map((st) => ({ op: st.op, args: st.args.map((a) => ("input" in a ? { input: index[a.input] } : a)) }));
    return { steps, out: chain.out };
  };
  /** The linears of the adjacent nodes at nodes[from..] reading view `x`, of one weight kind, while
   * no output aliases an input (`inputs`, a weight) or another output; `count`: the nodes they span. */
  const run = (from: number, x: TensorView, inputs: Storage[]): { lins: Lin[]; count: number } => {
    const lins: Lin[] = [];
    const outs: Storage[] = [];
    for (let k = from; ; k++) {
      const found = linearsOf(nodes[k], kinds);
      if (!found || found.some((a) => !sameView(a.x, x) || a.kind !== (lins[0] ?? found[0]).kind)) return { lins, count: k - from };
      const weights = found.flatMap((a) => a.storages), written = found.map((a) => a.out.storage);
      const clash = written.some((s, j) => [...inputs, ...outs, ...weights].includes(s) || written.indexOf(s) !== j) || weights.some((s) => outs.includes(s));
      if (clash) return { lins, count: k - from };
      inputs = [...inputs, ...weights];
      outs.push(...written);
      lins.push(...found);
    }
  };
  const node = (x: TensorView, norm: LinearGroupNorm | null, group: Lin[], outs: TensorView[], steps?: readonly FusedStep[]): GraphNode => ({
    op: group[0].kind ? "linearGroupQuantized" : "linearGroup", args: steps ? [x, norm, group.map((a) => a.w), outs, steps] : [x, norm, group.map((a) => a.w), outs],
    reads: [x.storage, ...(norm ? [norm.weight.storage] : []), ...group.flatMap((a) => a.storages)], writes: outs.map((v) => v.storage),
  });
  /** Emit `group` (and the node after it as its epilogue when it can be); returns the nodes consumed beyond the group. */
  const emit = (x: TensorView, norm: LinearGroupNorm | null, group: Lin[], next: GraphNode | undefined): number => {
    const ep = epilogue(x, norm, group, next);
    if (ep) {
      out.push(node(x, norm, group, [ep.out], ep.steps));
      return 1;
    }
    for (let c = 0; c < group.length; c += MAX_WEIGHTS) {
      const part = group.slice(c, c + MAX_WEIGHTS);
      out.push(node(x, norm, part, part.map((a) => a.out)));
    }
    return 0;
  };
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i];
    if (n.op === "rmsNorm") {
      const [nx, weight, y, eps, offset] = n.args as [TensorView, TensorView, TensorView, number, number];
      const K = nx.shape.at(-1)!, numel = nx.shape.reduce((a, b) => a * b, 1);
      const first = linearsOf(nodes[i + 1], kinds)?.[0];
      const { lins: group, count } = first && first.x.storage === y.storage ? run(i + 1, first.x, [nx.storage, weight.storage]) : { lins: [], count: 0 };
      const ok = group.length > 0 && group[0].x.shape[1] === K && group[0].x.shape[0] * K === numel && group[0].x.offset === y.offset
        && dense(nx, numel) && dense(y, numel)
        && temporary.has(y.storage) && !outputs.has(y.storage) && readers.get(y.storage) === count;
      if (ok) {
        const x: TensorView = { storage: nx.storage, dtype: "float32", shape: [numel / K, K], strides: [K, 1], offset: nx.offset };
        i += count + emit(x, { weight, eps, offset }, group, nodes[i + count + 1]);
        continue;
      }
    }
    const first = linearsOf(n, kinds)?.[0];
    const { lins: group, count } = first ? run(i, first.x, [first.x.storage]) : { lins: [], count: 0 };
    // A lone quantized group node becomes a linearGroupQuantized only to take an epilogue (it is one call already).
    if (group.length >= 2 && (count >= 2 || group[0].kind === 0 || epilogue(first!.x, null, group, nodes[i + count]))) {
      i += count - 1 + emit(first!.x, null, group, nodes[i + count]);
      continue;
    }
    out.push(n);
  }
  return out;
}
