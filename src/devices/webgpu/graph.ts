/// <reference types="@webgpu/types" />
/**
 * Graphs on webgpu (Device.compileGraph, see ../graph.ts): the kernels of a captured graph are
 * run once in recording mode, which keeps each dispatch (pipeline, buffers, parameters, workgroups)
 * instead of encoding it. The parameters of all dispatches go into one uniform buffer written once,
 * and every bind group is created once; a run encodes the whole list into one compute pass and
 * submits it as one command buffer. Small slots (graph inputs and outputs of at most STAGED_BYTES,
 * such as a decode step's token ids, positions and result) are staged: the steps bind a buffer of
 * the graph's own, the run's buffer is copied into it before the pass and, when a step writes it,
 * back after, so their bind groups never change. Bind groups that bind another slot (a KV cache)
 * are re-created only when the slot's buffer differs from the previous run's.
 */
import type { Storage } from "../device.js";
import type { GraphExecutable, GraphSpec } from "../graph.js";
import { getKernel } from "../kernels.js";
import type { WebGPUDevice } from "./device.js";
import type { RecordedDispatch } from "./dispatch.js";

const SLOT_BYTES = 256;
/** Slots of at most this many bytes are staged (see the file comment). */
const STAGED_BYTES = 4096;
/** GPUBufferUsage UNIFORM | COPY_DST. */
const UNIFORM_USAGE = 0x40 | 0x08;

interface Step {
  readonly d: RecordedDispatch;
  group: GPUBindGroup;
  /** (binding index, slot) of every buffer bound per run. */
  readonly slotBindings: readonly (readonly [number, number])[];
  /** The slot buffers the current bind group was made with. */
  bound: GPUBuffer[];
}

export function compileGraph(dev: WebGPUDevice, spec: GraphSpec): GraphExecutable {
  const recorded: RecordedDispatch[] = [];
  const retained = dev.retainAllocations(() => {
    dev.dispatcher.record(recorded, () => {
      for (const c of spec.calls) (getKernel(c.op, dev.type) as (...a: unknown[]) => void)(...c.args);
    });
  });
  // Staged slots: each step's binding of the placeholder's buffer becomes the graph's own buffer.
  const staged = spec.placeholders.flatMap((s, slot) => {
    if (s.nbytes > STAGED_BYTES || s.nbytes === 0) return [];
    const from = s.handle as GPUBuffer, own = dev.allocate(s.nbytes), to = own.handle as GPUBuffer;
    let written = false;
    for (const [k, d] of recorded.entries()) {
      if (!d.buffers.includes(from)) continue;
      if (d.buffers.some((b, j) => b === from && d.prog.access[j] === "write")) written = true;
      recorded[k] = { ...d, buffers: d.buffers.map((b) => (b === from ? to : b)) };
    }
    return [{ slot, own, to, size: Math.ceil(s.nbytes / 4) * 4, written }];
  });
  const slotOf = new Map<GPUBuffer, number>();
  spec.placeholders.forEach((s, i) => slotOf.set(s.handle as GPUBuffer, i));
  const gpu = dev.gpu;
  const params = gpu.createBuffer({ size: Math.max(1, recorded.length) * SLOT_BYTES, usage: UNIFORM_USAGE, label: "graph parameters" });
  const arena = new Uint32Array((Math.max(1, recorded.length) * SLOT_BYTES) / 4);
  recorded.forEach((d, i) => arena.set(d.params, (i * SLOT_BYTES) / 4));
  gpu.queue.writeBuffer(params, 0, arena.buffer, 0, arena.byteLength);

  const bindGroup = (i: number, d: RecordedDispatch, buffers: readonly GPUBuffer[]) => gpu.createBindGroup({
    layout: d.prog.layout,
    entries: [
      { binding: 0, resource: { buffer: params, offset: i * SLOT_BYTES, size: SLOT_BYTES } },
      ...buffers.map((b, j) => ({ binding: j + 1, resource: b })),
    ],
  });
  const steps: Step[] = recorded.map((d, i) => {
    const slotBindings = d.buffers.flatMap((b, j) => (slotOf.has(b) ? [[j, slotOf.get(b)!] as const] : []));
    return { d, group: bindGroup(i, d, d.buffers), slotBindings, bound: slotBindings.map(([j]) => d.buffers[j]) };
  });
  // Storages whose buffers the steps bind: kept reachable, or the collector would recycle the buffers.
  const owners = [spec, retained, staged];
  const dynamic = steps.map((s, i) => [s, i] as const).filter(([s]) => s.slotBindings.length > 0);

  return {
    run(slots: readonly Storage[]): void {
      void owners; // planned buffers, constants and kernel scratch live as long as the graph
      for (const [s, i] of dynamic) {
        let changed = false;
        s.slotBindings.forEach(([, slot], k) => { if (s.bound[k] !== slots[slot].handle) changed = true; });
        if (!changed) continue;
        const buffers = [...s.d.buffers];
        s.slotBindings.forEach(([j, slot], k) => { buffers[j] = s.bound[k] = slots[slot].handle as GPUBuffer; });
        s.group = bindGroup(i, s.d, buffers);
      }
      dev.dispatcher.submitGraph((encoder) => {
        for (const s of staged) encoder.copyBufferToBuffer(slots[s.slot].handle as GPUBuffer, 0, s.to, 0, s.size);
        const pass = encoder.beginComputePass();
        let pipeline: GPUComputePipeline | null = null;
        for (const s of steps) {
          if (s.d.prog.pipeline !== pipeline) pass.setPipeline((pipeline = s.d.prog.pipeline));
          pass.setBindGroup(0, s.group);
          pass.dispatchWorkgroups(s.d.groups[0], s.d.groups[1], s.d.groups[2]);
        }
        pass.end();
        for (const s of staged) if (s.written) encoder.copyBufferToBuffer(s.to, 0, slots[s.slot].handle as GPUBuffer, 0, s.size);
      });
    },
  };
}
