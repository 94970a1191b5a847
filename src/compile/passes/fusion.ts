/**
 * Elementwise fusion: chains of float32 unary and arithmetic binary ops become one
 * `fusedElementwise` kernel call (devices/kernels.ts), so an intermediate such as silu(gate) in
 * silu(gate) * up is never written to memory. A producer joins its consumer when its result is an
 * intermediate of the call that only that consumer reads, through the very view it was written
 * as, over the consumer's shape; and no node in between writes what the producer reads. Runs only
 * on devices that register the fused kernel.
 */
import type { Storage } from "../../devices/device.js";
import { FUSABLE_BINARY, type BinaryOp, type FusedOperand, type FusedStep, type UnaryOp } from "../../devices/kernels.js";
import type { TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";

/** Most inputs of one fused kernel (each is a storage binding). */
const MAX_INPUTS = 6;

interface Group {
  steps: FusedStep[];
  inputs: TensorView[];
  out: TensorView;
  /** Index of the first node the group contains, and all of them. */
  first: number;
  members: number[];
  absorbed: boolean;
  size: number;
}

/** The elementwise step a node performs, or null when it cannot be fused. */
function asStep(n: GraphNode): { op: UnaryOp | BinaryOp; operands: TensorView[]; out: TensorView } | null {
  if (n.op === "unary") {
    const [op, x, out] = n.args as [UnaryOp, TensorView, TensorView];
    return x.dtype === "float32" && out.dtype === "float32" ? { op, operands: [x], out } : null;
  }
  if (n.op === "binary") {
    const [op, a, b, out] = n.args as [BinaryOp, TensorView, TensorView, TensorView];
    return FUSABLE_BINARY.has(op) && a.dtype === "float32" && b.dtype === "float32" && out.dtype === "float32" ? { op, operands: [a, b], out } : null;
  }
  return null;
}

const sameView = (a: TensorView, b: TensorView) =>
  a.storage === b.storage && a.offset === b.offset && `${a.shape}` === `${b.shape}` && `${a.strides}` === `${b.strides}`;

export function fuseElementwise(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const readers = new Map<Storage, number>(), writers = new Map<Storage, number>();
  for (const n of nodes) {
    for (const s of n.reads) readers.set(s, (readers.get(s) ?? 0) + 1);
    for (const s of n.writes) writers.set(s, (writers.get(s) ?? 0) + 1);
  }
  const groups: (Group | null)[] = nodes.map(() => null);
  const producer = new Map<Storage, number>();
  nodes.forEach((n, i) => {
    const step = asStep(n);
    if (!step) return;
    const g: Group = { steps: [], inputs: [], out: step.out, first: i, members: [i], absorbed: false, size: 1 };
    const input = (v: TensorView): FusedOperand => {
      let k = g.inputs.findIndex((u) => sameView(u, v));
      if (k < 0) k = g.inputs.push(v) - 1;
      return { input: k };
    };
    const operands = step.operands.map((v, j): FusedOperand => {
      const p = producer.get(v.storage);
      const pg = p === undefined ? null : groups[p];
      const fusable = pg && !pg.absorbed && temporary.has(v.storage) && !outputs.has(v.storage)
        && readers.get(v.storage) === 1 && writers.get(v.storage) === 1 && sameView(v, pg.out)
        && `${pg.out.shape}` === `${step.out.shape}`
        && g.inputs.length + pg.inputs.length + (step.operands.length - 1 - j) <= MAX_INPUTS
        && !nodes.slice(pg.first + 1, i).some((m, k) => !pg.members.includes(pg.first + 1 + k) && m.writes.some((s) => pg.inputs.some((u) => u.storage === s)));
      if (!pg || !fusable) return input(v);
      pg.absorbed = true;
      g.first = Math.min(g.first, pg.first);
      g.size += pg.size;
      g.members.push(...pg.members);
      const base = g.steps.length;
      const remap = pg.steps.map((s) => ({ op: s.op, args: s.args.map((a) => ("input" in a ? input(pg.inputs[a.input]) : { step: base + a.step })) }));
      g.steps.push(...remap);
      return { step: g.steps.length - 1 };
    });
    g.steps.push({ op: step.op, args: operands });
    groups[i] = g;
    producer.set(step.out.storage, i);
  });
  const out: GraphNode[] = [];
  nodes.forEach((n, i) => {
    const g = groups[i];
    if (g?.absorbed) return;
    if (!g || g.size === 1) {
      out.push(n);
      return;
    }
    out.push({ op: "fusedElementwise", args: [g.steps, g.inputs, g.out], reads: g.inputs.map((v) => v.storage), writes: [g.out.storage] });
  });
  return out;
}

