/**
 * A compiled graph ready to replay: built from one capture, it binds the call's input storages
 * and fresh output storages to slots and runs every kept kernel call through the device's graph
 * runner (Device.compileGraph, else devices/graph.ts replayKernels). Intermediates live in the
 * buffers of the memory plan; captured tensors (parameters, a KV cache) and one-element constants
 * are used in place, so their current contents are read and writes to them (mutations) happen.
 */
import type { Device, Storage } from "../devices/device.js";
import { replayKernels, type GraphCall, type GraphExecutable, type SlotView } from "../devices/graph.js";
import { registeredOps } from "../devices/kernels.js";
import { track } from "../tensor/scope.js";
import { Tensor } from "../tensor/tensor.js";
import { isView, type Capture } from "./capture.js";
import type { Leaf } from "./guards.js";
import { eliminateDeadCode } from "./passes/dce.js";
import { fuseLinearEpilogue } from "./passes/epilogue.js";
import { fuseElementwise } from "./passes/fusion.js";
import { groupLinears } from "./passes/linear_group.js";
import { fuseLinearArgmax } from "./passes/linear_argmax.js";
import { fuseRotaryKVWrite } from "./passes/rotary_kv.js";
import { fuseRotaryGather } from "./passes/rotary_gather.js";
import { fuseRotaryNorms } from "./passes/rotary_norm.js";
import { fuseAttentionOut } from "./passes/attention_out.js";
import { fuseMlpOut } from "./passes/mlp_out.js";
import { planMemory } from "./passes/memory_plan.js";

/** Where a returned tensor's storage comes from on each replay. */
type StorageRef = { slot: number } | { fixed: Storage };
type Template =
  | { tensor: { ref: StorageRef; dtype: Tensor["dtype"]; shape: readonly number[]; strides: readonly number[]; offset: number } }
  | { array: Template[] }
  | { record: [string, Template][] }
  | { value: unknown };

/** What compiling one capture did (TSORCH_LOGS=graph prints it). */
export interface GraphInfo {
  readonly nodes: number;
  readonly deadNodes: number;
  /** Kernel calls saved by fusion (elementwise chains, epilogues, linear groups). */
  readonly fusedNodes: number;
  readonly plannedBytes: number;
  readonly capturedBytes: number;
}

export class GraphProgram {
  private readonly exec: GraphExecutable;
  /** Slot of each input leaf (-1: not a tensor, or a tensor the graph does not use by storage). */
  private readonly inputSlots: number[];
  private readonly outputSlots: { slot: number; nbytes: number }[];
  private readonly template: Template;
  private readonly slotCount: number;
  readonly info: GraphInfo;

  constructor(cap: Capture, leaves: readonly Leaf[], private readonly device: Device) {
    const slots = new Map<Storage, number>();
    const placeholders: Storage[] = [];
    const slotOf = (s: Storage) => {
      let i = slots.get(s);
      if (i === undefined) {
        slots.set(s, (i = placeholders.length));
        placeholders.push(s);
      }
      return i;
    };
    this.inputSlots = leaves.map((l) => (l.tensor ? slotOf(l.tensor.storage) : -1));
    const outputs = new Set<Storage>();
    collectOutputs(cap.result, outputs);
    const isInput = (s: Storage) => slots.has(s);
    const freshOutputs = [...outputs].filter((s) => cap.allocated.has(s) && !isInput(s));
    this.outputSlots = freshOutputs.map((s) => ({ slot: slotOf(s), nbytes: s.nbytes }));
    this.slotCount = placeholders.length;

    const temporary = new Set([...cap.allocated].filter((s) => !slots.has(s)));
    const live = eliminateDeadCode(cap.nodes, outputs, temporary);
    const ops = registeredOps(device.type);
    const epilogued = ops.includes("linearAdd") || ops.includes("linearAddQuantized")
      ? fuseLinearEpilogue(live, outputs, temporary, { float: ops.includes("linearAdd"), quantized: ops.includes("linearAddQuantized") }) : live;
    const fused = ops.includes("fusedElementwise") ? fuseElementwise(epilogued, outputs, temporary) : epilogued;
    const grouped = ops.includes("linearGroup") || ops.includes("linearGroupQuantized")
      ? groupLinears(fused, outputs, temporary, { float: ops.includes("linearGroup"), quantized: ops.includes("linearGroupQuantized") }) : fused;
    const headed = ops.includes("linearArgmax") || ops.includes("linearArgmaxQuantized")
      ? fuseLinearArgmax(grouped, outputs, temporary, { float: ops.includes("linearArgmax"), quantized: ops.includes("linearArgmaxQuantized") }) : grouped;
    const rotated = ops.includes("rotaryKVWrite") ? fuseRotaryKVWrite(headed, outputs, temporary) : headed;
    const gathered = ops.includes("rotaryKVWrite") ? fuseRotaryGather(rotated, outputs, temporary) : rotated;
    const normed = ops.includes("normRotaryKVWrite") ? fuseRotaryNorms(gathered, outputs, temporary) : gathered;
    const attended = ops.includes("pagedAttentionLinearAdd") ? fuseAttentionOut(normed, outputs, temporary) : normed;
    const kept = ops.includes("linearGroupLinearAdd") ? fuseMlpOut(attended, outputs, temporary) : attended;
    const plan = planMemory(kept, temporary, device);
    this.info = {
      nodes: kept.length, deadNodes: cap.nodes.length - live.length, fusedNodes: live.length - kept.length,
      plannedBytes: plan.plannedBytes, capturedBytes: plan.capturedBytes,
    };

    const slotViews: SlotView[] = [];
    const mapArg = (v: unknown): unknown => {
      if (isView(v)) {
        const slot = slots.get(v.storage);
        const view = { storage: plan.assignment.get(v.storage) ?? v.storage, dtype: v.dtype, shape: v.shape, strides: v.strides, offset: v.offset };
        if (slot === undefined) return view;
        const sv: SlotView = { ...view, slot };
        slotViews.push(sv);
        return sv;
      }
      if (Array.isArray(v)) return v.map(mapArg);
      if (typeof v === "object" && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapArg(x)]));
      return v;
    };
    const calls: GraphCall[] = kept.map((n) => ({ op: n.op, args: n.args.map(mapArg) }));
    const spec = { calls, slotViews, placeholders };
    this.exec = device.compileGraph?.(spec) ?? replayKernels(device.type, spec);
    this.template = makeTemplate(cap.result, (s) => (slots.has(s) ? { slot: slots.get(s)! } : { fixed: s }));
  }

  /** Replay for a call whose guards matched: `leaves` are that call's flattened arguments. */
  run(leaves: readonly Leaf[]): unknown {
    const bound = new Array<Storage>(this.slotCount);
    for (let i = 0; i < leaves.length; i++) {
      const slot = this.inputSlots[i];
      if (slot >= 0) bound[slot] = leaves[i].tensor!.storage;
    }
    for (const o of this.outputSlots) {
      const s = this.device.allocate(o.nbytes);
      track(s);
      bound[o.slot] = s;
    }
    this.exec.run(bound);
    return build(this.template, bound);
  }
}

function collectOutputs(v: unknown, out: Set<Storage>): void {
  if (v instanceof Tensor) out.add(v.storage);
  else if (Array.isArray(v)) for (const x of v) collectOutputs(x, out);
  else if (isRecord(v)) for (const x of Object.values(v)) collectOutputs(x, out);
}

/** Where a result holds a tensor a replay could not rebuild (inside a class instance or Map), else null. */
export function hiddenTensor(v: unknown, path = "result"): string | null {
  if (v instanceof Tensor) return null;
  if (Array.isArray(v)) return v.map((x, i) => hiddenTensor(x, `${path}[${i}]`)).find((x) => x) ?? null;
  if (isRecord(v)) return Object.entries(v).map(([k, x]) => hiddenTensor(x, `${path}.${k}`)).find((x) => x) ?? null;
  if (typeof v === "object" && v !== null && Object.values(v).some((x) => x instanceof Tensor)) return `${path} (a ${v.constructor?.name ?? "object"})`;
  return null;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && Object.getPrototypeOf(v) === Object.prototype;
}

function makeTemplate(v: unknown, ref: (s: Storage) => StorageRef): Template {
  if (v instanceof Tensor) return { tensor: { ref: ref(v.storage), dtype: v.dtype, shape: v.shape, strides: v.strides, offset: v.offset } };
  if (Array.isArray(v)) return { array: v.map((x) => makeTemplate(x, ref)) };
  if (isRecord(v)) return { record: Object.entries(v).map(([k, x]) => [k, makeTemplate(x, ref)]) };
  return { value: v };
}

function build(t: Template, bound: readonly Storage[]): unknown {
  if ("tensor" in t) {
    const { ref, dtype, shape, strides, offset } = t.tensor;
    return new Tensor("slot" in ref ? bound[ref.slot] : ref.fixed, dtype, shape, strides, offset);
  }
  if ("array" in t) return t.array.map((x) => build(x, bound));
  if ("record" in t) return Object.fromEntries(t.record.map(([k, x]) => [k, build(x, bound)]));
  return t.value;
}

