/**
 * Running a `cpu-wasm` op: the repository's WebAssembly module is instantiated once with nothing
 * but a memory (`env.memory`; a module asking for any other import is refused), and each call
 * copies its input tensors into that memory, calls the op's export with the argument expressions of
 * its metadata (ptr(x) = address of tensor x there), and copies the outputs out into new cpu
 * tensors. Inputs the op lists as `resident` (weights) are copied once and kept while their tensor
 * lives. Memory layout: the module may use [0, 64 KiB) itself; residents, then per-call buffers,
 * above that (16-byte aligned).
 */
import { empty } from "../tensor/ops.js";
import { itemsize } from "../tensor/dtype.js";
import type { Tensor } from "../tensor/tensor.js";
import { evaluate } from "./expr.js";
import { bindCall, type OpSpec } from "./metadata.js";

const PAGE = 65536;
const align = (n: number) => (n + 15) & ~15;

/** An instantiated cpu-wasm module and its memory. */
export class WasmModule {
  private readonly memory = new WebAssembly.Memory({ initial: 2 });
  private readonly exports: Record<string, unknown>;
  private readonly resident = new WeakMap<Tensor, number>();
  private top = PAGE;

  /** Compile `bytes`; throws when the module imports anything but its memory. */
  constructor(private readonly kernel: string, bytes: Uint8Array<ArrayBuffer>) {
    const module = new WebAssembly.Module(bytes);
    const imports = WebAssembly.Module.imports(module);
    const extra = imports.filter((i) => !(i.module === "env" && i.name === "memory" && i.kind === "memory"));
    if (extra.length > 0) {
      throw new Error(`kernel ${kernel}: its WebAssembly module imports ${extra.map((i) => `${i.module}.${i.name} (${i.kind})`).join(", ")}; only env.memory is provided`);
    }
    this.exports = new WebAssembly.Instance(module, { env: { memory: this.memory } }).exports as Record<string, unknown>;
  }

  private alloc(bytes: number): number {
    const at = this.top;
    this.top = align(at + bytes);
    const need = this.top - this.memory.buffer.byteLength;
    if (need > 0) this.memory.grow(Math.ceil(need / PAGE));
    return at;
  }

  private copyIn(t: Tensor, at: number): void {
    const c = t.contiguous(), n = c.numel * itemsize(c.dtype);
    new Uint8Array(this.memory.buffer, at, n).set((c.storage.handle as Uint8Array).subarray(c.byteOffset, c.byteOffset + n));
  }

  /** Run op `opName` (`op`) on cpu tensors and scalars; returns its outputs by name. */
  run(opName: string, op: OpSpec, args: (Tensor | number)[]): Record<string, Tensor> {
    const ptrs: Record<string, number> = {};
    const call = bindCall(this.kernel, opName, op, args, { ptr: (n) => ptrs[n] ?? (() => { throw new Error(`kernel ${this.kernel}: op ${opName}: ptr(${n}) names no tensor`); })() });
    const tensors = Object.values(call.inputs);
    if (tensors.some((t) => t.device.type !== "cpu")) {
      throw new Error(`kernel ${this.kernel}: op ${opName} (cpu-wasm) got tensors on ${tensors.map((t) => t.device.name).join(", ")}`);
    }
    const fn = this.exports[op.call!.export];
    if (typeof fn !== "function") throw new Error(`kernel ${this.kernel}: op ${opName}: the module exports no function ${op.call!.export}`);
    const resident = new Set(op.resident ?? []);
    for (const [n, t] of Object.entries(call.inputs)) {
      if (!resident.has(n)) continue;
      let at = this.resident.get(t);
      if (at === undefined) {
        at = this.alloc(t.numel * itemsize(t.dtype));
        this.copyIn(t, at);
        this.resident.set(t, at);
      }
      ptrs[n] = at;
    }
    const mark = this.top;
    try {
      for (const [n, t] of Object.entries(call.inputs)) {
        if (resident.has(n)) continue;
        ptrs[n] = this.alloc(t.numel * itemsize(t.dtype));
        this.copyIn(t, ptrs[n]);
      }
      const sizes: Record<string, number> = {};
      for (const [n, shape] of Object.entries(call.outputs)) sizes[n] = shape.reduce((a, b) => a * b, 1) * itemsize(op.outputs[n].dtype);
      for (const [n, t] of Object.entries(op.temps ?? {})) sizes[n] = Math.max(1, evaluate(t.size, call.scope)) * itemsize(t.dtype);
      for (const [n, s] of Object.entries(sizes)) ptrs[n] = this.alloc(s);
      (fn as (...a: number[]) => void)(...op.call!.args.map((a) => evaluate(a.startsWith("f32:") ? a.slice(4) : a, call.scope)));
      const cpu = tensors[0].device;
      const out: Record<string, Tensor> = {};
      for (const [n, shape] of Object.entries(call.outputs)) {
        const t = empty(shape, op.outputs[n].dtype, cpu);
        (t.storage.handle as Uint8Array).set(new Uint8Array(this.memory.buffer, ptrs[n], sizes[n]));
        out[n] = t;
      }
      return out;
    } finally {
      this.top = mark;
    }
  }
}
