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
 * the q/k norms that read q and k). Runs only on devices
 * that register `linearGroup`, after the other fusions (which move an MLP's activation past its up
 * projection).
 */
import type { Storage } from "../../devices/device.js";
import { FUSABLE_BINARY, type BinaryOp, type FusedStep, type LinearGroupNorm, type UnaryOp } from "../../devices/kernels.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { readerCounts } from "./readers.js";

/** Most weights of one group (each weight and output is a storage binding). */
const MAX_WEIGHTS = 3;

/** A contiguous float32 view of `numel` elements. */
const dense = (v: TensorView, n: number) => isContiguous(v) && numel(v) === n && v.dtype === "float32";

type LinearArgs = [TensorView, TensorView, TensorView | null, TensorView];

/** The linear's arguments when it can join a group (2-D float32 input, no bias; the weight of any
 * float dtype: a device's kernel runs what it cannot fuse, e.g. webgpu's half-precision weights,
 * as the separate ops). */
function groupable(n: GraphNode | undefined): LinearArgs | null {
  if (n?.op !== "linear") return null;
  const [x, w, bias, out] = n.args as LinearArgs;
  const [M, K] = x.shape;
  const ok = bias === null && x.shape.length === 2 && dense(x, M * K) && dense(out, M * w.shape[0]);
  return ok ? [x, w, bias, out] : null;
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
function gatherLinears(nodes: readonly GraphNode[]): GraphNode[] {
  const out = [...nodes];
  for (let i = 0; i < out.length; i++) {
    const a = groupable(out[i]);
    if (!a) continue;
    let end = i + 1;
    while (end < out.length && groupable(out[end]) && sameView(groupable(out[end])![0], a[0])) end++;
    for (let j = end; j < Math.min(out.length, end + LOOKAHEAD); j++) {
      const b = groupable(out[j]);
      if (!b || !sameView(b[0], a[0])) continue;
      const between = out.slice(end, j);
      const safe = between.every((n) => !n.writes.some((s) => s === b[0].storage || s === b[1].storage || s === b[3].storage) && !n.reads.includes(b[3].storage));
      if (!safe) continue;
      const [moved] = out.splice(j, 1);
      out.splice(end++, 0, moved);
    }
    i = end - 1;
  }
  return out;
}

/** The nodes with linear groups formed (see the file comment); `temporary`: storages that die with the call. */
export function groupLinears(all: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const nodes = gatherLinears(all);
  const readers = readerCounts(nodes);
  const out: GraphNode[] = [];
  /** `next` as the epilogue of `group` (its chain's steps reading product i as input i, and its output), or null. */
  const epilogue = (x: TensorView, norm: LinearGroupNorm | null, group: LinearArgs[], next: GraphNode | undefined) => {
    const chain = chainOf(next);
    if (!chain || group.length > MAX_WEIGHTS || group.some((a) => a[1].shape[0] !== group[0][1].shape[0])) return null;
    const M = x.shape[0], N = group[0][1].shape[0];
    const products = group.map((a) => a[3]);
    const index = chain.inputs.map((v) => products.findIndex((p) => p.storage === v.storage && p.offset === v.offset && dense(v, M * N)));
    const ok = index.every((k) => k >= 0) && products.every((p, k) => index.includes(k) && temporary.has(p.storage) && !outputs.has(p.storage) && readers.get(p.storage) === 1)
      && dense(chain.out, M * N) && ![x.storage, norm?.weight.storage, ...group.map((a) => a[1].storage)].includes(chain.out.storage);
    if (!ok) return null;
    const steps = chain.steps.map((st) => ({ op: st.op, args: st.args.map((a) => ("input" in a ? { input: index[a.input] } : a)) }));
    return { steps, out: chain.out };
  };
  /** The adjacent linears at nodes[from..] reading view `x`, while no output aliases an input (`inputs`, a weight) or another output. */
  const run = (from: number, x: TensorView, inputs: Storage[]): LinearArgs[] => {
    const found: LinearArgs[] = [];
    const outs: Storage[] = [];
    for (let k = from; ; k++) {
      const a = groupable(nodes[k]);
      if (!a || !sameView(a[0], x) || outs.includes(a[1].storage) || [...inputs, ...outs, a[1].storage].includes(a[3].storage)) return found;
      inputs = [...inputs, a[1].storage];
      outs.push(a[3].storage);
      found.push(a);
    }
  };
  /** Emit `group` (and the node after it as its epilogue when it can be); returns the nodes consumed beyond the group. */
  const emit = (x: TensorView, norm: LinearGroupNorm | null, group: LinearArgs[], next: GraphNode | undefined): number => {
    const ep = epilogue(x, norm, group, next);
    if (ep) {
      out.push({
        op: "linearGroup", args: [x, norm, group.map((a) => a[1]), [ep.out], ep.steps],
        reads: [x.storage, ...(norm ? [norm.weight.storage] : []), ...group.map((a) => a[1].storage)], writes: [ep.out.storage],
      });
      return 1;
    }
    for (let c = 0; c < group.length; c += MAX_WEIGHTS) {
      const part = group.slice(c, c + MAX_WEIGHTS);
      out.push({
        op: "linearGroup", args: [x, norm, part.map((a) => a[1]), part.map((a) => a[3])],
        reads: [x.storage, ...(norm ? [norm.weight.storage] : []), ...part.map((a) => a[1].storage)], writes: part.map((a) => a[3].storage),
      });
    }
    return 0;
  };
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i];
    if (n.op === "rmsNorm") {
      const [nx, weight, y, eps, offset] = n.args as [TensorView, TensorView, TensorView, number, number];
      const K = nx.shape.at(-1)!, numel = nx.shape.reduce((a, b) => a * b, 1);
      const first = groupable(nodes[i + 1]);
      const group = first && first[0].storage === y.storage ? run(i + 1, first[0], [nx.storage, weight.storage]) : [];
      const ok = group.length > 0 && group[0][0].shape[1] === K && group[0][0].shape[0] * K === numel && group[0][0].offset === y.offset
        && dense(nx, numel) && dense(y, numel)
        && temporary.has(y.storage) && !outputs.has(y.storage) && readers.get(y.storage) === group.length;
      if (ok) {
        const x: TensorView = { storage: nx.storage, dtype: "float32", shape: [numel / K, K], strides: [K, 1], offset: nx.offset };
        i += group.length + emit(x, { weight, eps, offset }, group, nodes[i + group.length + 1]);
        continue;
      }
    }
    const a = groupable(n);
    const group = a ? run(i, a[0], [a[0].storage]) : [];
    if (group.length >= 2) {
      i += group.length - 1 + emit(a![0], null, group, nodes[i + group.length]);
      continue;
    }
    out.push(n);
  }
  return out;
}
