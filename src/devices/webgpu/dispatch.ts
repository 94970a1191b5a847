/// <reference types="@webgpu/types" />
/**
 * Eager dispatch for the webgpu device: kernels are recorded into one command encoder (one open
 * compute pass) and submitted in batches: at sync points (reads, synchronize) and every
 * MAX_BATCH dispatches, so the GPU starts while the host records more. Compiled pipelines are
 * cached by kernel key, bind-group layouts by binding signature.
 *
 * Every kernel's binding 0 is a 256-byte uniform block of 64 u32 parameters (floats as their
 * bits). The parameters of a batch live in one host arena written to the GPU just before submit.
 */
import type { Allocator } from "./allocator.js";

/** How a kernel binds a storage buffer: read-only, or read-write (which also allows atomics). */
export type Access = "read" | "write";

export interface Program {
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
  /** How each storage binding (1, 2, …) is accessed. */
  readonly access: readonly Access[];
}

/** u32 words of each dispatch's parameter block. */
export const PARAM_WORDS = 64;
const SLOT_BYTES = 256;
/** Dispatches per submit: small enough that the GPU starts while the host records the rest of a step. */
const MAX_BATCH = 64;
/** GPUBufferUsage UNIFORM | COPY_DST, MAP_READ | COPY_DST. */
const UNIFORM_USAGE = 0x40 | 0x08;
const READBACK_USAGE = 0x01 | 0x08;
const MAP_READ = 0x01;
/** Read-back staging buffers of at most this many bytes are kept for the next read (see readBack). */
const KEPT_STAGING_BYTES = 4096;
/** How many such buffers are kept (reads may overlap: a pipelined generation has one or two in flight). */
const KEPT_STAGING = 4;
/** GPUShaderStage.COMPUTE. */
const GPUShaderStageCompute = 0x4;

/** The bits of a float32, for float parameters. */
export function fbits(x: number): number {
  F32[0] = x;
  return U32[0];
}
const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/** Workgroup counts covering `threads` threads of workgroups of `size`, with x <= 65535. */
export function grid(threads: number, size: number): [number, number, number] {
  const groups = Math.max(1, Math.ceil(threads / size));
  const x = Math.min(groups, 65535);
  return [x, Math.ceil(groups / x), 1];
}

/** One dispatch as recorded for a graph (see ./graph.ts): replayed later with its own bind group. */
export interface RecordedDispatch {
  readonly prog: Program;
  readonly buffers: readonly GPUBuffer[];
  readonly params: Uint32Array;
  readonly groups: readonly [number, number, number];
}

export class Dispatcher {
  private readonly programs = new Map<string, Program>();
  private readonly layouts = new Map<string, { group: GPUBindGroupLayout; pipeline: GPUPipelineLayout }>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private readonly params: GPUBuffer;
  private readonly arena = new Uint32Array(MAX_BATCH * (SLOT_BYTES / 4));
  private batched = 0;
  private recording: RecordedDispatch[] | null = null;
  /** Idle small staging buffers (KEPT_STAGING_BYTES each), reused so a small read allocates and maps no new memory. */
  private readonly idleStaging: GPUBuffer[] = [];

  constructor(private readonly device: GPUDevice, private readonly allocator: Allocator) {
    this.params = device.createBuffer({ size: this.arena.byteLength, usage: UNIFORM_USAGE });
  }

  /** The compiled kernel `key` (its WGSL made by `code` on first use), binding 0 plus `access`. */
  program(key: string, access: readonly Access[], code: () => string): Program {
    let prog = this.programs.get(key);
    if (!prog) {
      const layout = this.layout(access);
      const module = this.device.createShaderModule({ code: code(), label: key });
      const pipeline = this.device.createComputePipeline({ layout: layout.pipeline, compute: { module, entryPoint: "main" }, label: key });
      prog = { pipeline, layout: layout.group, access: [...access] };
      this.programs.set(key, prog);
    }
    return prog;
  }

  private layout(access: readonly Access[]): { group: GPUBindGroupLayout; pipeline: GPUPipelineLayout } {
    const key = access.join(",");
    let layout = this.layouts.get(key);
    if (!layout) {
      const entries: GPUBindGroupLayoutEntry[] = [{ binding: 0, visibility: GPUShaderStageCompute, buffer: { type: "uniform" } }];
      access.forEach((a, i) => entries.push({ binding: i + 1, visibility: GPUShaderStageCompute, buffer: { type: a === "read" ? "read-only-storage" : "storage" } }));
      const group = this.device.createBindGroupLayout({ entries });
      layout = { group, pipeline: this.device.createPipelineLayout({ bindGroupLayouts: [group] }) };
      this.layouts.set(key, layout);
    }
    return layout;
  }

  /** Record one dispatch of `prog` over `groups` workgroups with storage `buffers` and `params`. */
  dispatch(prog: Program, buffers: readonly GPUBuffer[], params: ArrayLike<number>, groups: readonly [number, number, number]): void {
    if (params.length > PARAM_WORDS) throw new Error(`webgpu: ${params.length} kernel parameters exceed the ${PARAM_WORDS}-word block`);
    if (this.recording) {
      this.recording.push({ prog, buffers: [...buffers], params: Uint32Array.from(params), groups: [groups[0], groups[1], groups[2]] });
      return;
    }
    if (this.batched === MAX_BATCH) this.flush();
    const slot = this.batched++;
    this.arena.set(params, slot * (SLOT_BYTES / 4));
    // Whole buffers are bound (views pass element offsets as parameters); the direct
    // `resource: buffer` form is markedly cheaper in dawn.node than { buffer }.
    const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.params, offset: slot * SLOT_BYTES, size: SLOT_BYTES } }];
    for (let i = 0; i < buffers.length; i++) entries.push({ binding: i + 1, resource: buffers[i] });
    const pass = this.computePass();
    pass.setPipeline(prog.pipeline);
    pass.setBindGroup(0, this.device.createBindGroup({ layout: prog.layout, entries }));
    pass.dispatchWorkgroups(groups[0], groups[1], groups[2]);
  }

  private computePass(): GPUComputePassEncoder {
    if (!this.pass) this.pass = this.commandEncoder().beginComputePass();
    return this.pass;
  }

  private commandEncoder(): GPUCommandEncoder {
    this.encoder ??= this.device.createCommandEncoder();
    return this.encoder;
  }

  /** Record a buffer-to-buffer copy (offsets and size multiples of 4) after the recorded kernels. */
  private copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    this.pass?.end();
    this.pass = null;
    this.commandEncoder().copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  /** Run `fn` with dispatches appended to `into` instead of being encoded (graph recording). */
  record(into: RecordedDispatch[], fn: () => void): void {
    if (this.recording) throw new Error("webgpu: a graph is already being recorded");
    this.recording = into;
    try {
      fn();
    } finally {
      this.recording = null;
    }
  }

  /** Submit everything recorded so far. */
  flush(): void {
    if (!this.encoder) return;
    this.pass?.end();
    this.pass = null;
    if (this.batched > 0) this.device.queue.writeBuffer(this.params, 0, this.arena.buffer, 0, this.batched * SLOT_BYTES);
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
    this.batched = 0;
    this.allocator.submitted();
  }

  /** Submit eager work, then `encode`'s commands as one more submit (a graph replay, ./graph.ts). */
  submitGraph(encode: (encoder: GPUCommandEncoder) => void): void {
    this.flush();
    const encoder = this.device.createCommandEncoder();
    encode(encoder);
    this.device.queue.submit([encoder.finish()]);
    this.allocator.submitted();
  }

  /**
   * Copy `size` bytes (multiples of 4) at `offset` of each source to the host, after all recorded
   * work. Reads of at most KEPT_STAGING_BYTES (a greedy step's ids, a status block) go through a
   * reused staging buffer.
   */
  async readBack(sources: readonly { buffer: GPUBuffer; offset: number; size: number }[]): Promise<Uint8Array[]> {
    const total = sources.reduce((s, x) => s + x.size, 0);
    const small = total <= KEPT_STAGING_BYTES;
    const staging = (small && this.idleStaging.pop()) || this.device.createBuffer({ size: small ? KEPT_STAGING_BYTES : Math.max(4, total), usage: READBACK_USAGE });
    let at = 0;
    for (const s of sources) {
      if (s.size > 0) this.copy(s.buffer, s.offset, staging, at, s.size);
      at += s.size;
    }
    this.flush();
    try {
      await staging.mapAsync(MAP_READ, 0, Math.max(4, total));
    } catch (e) {
      staging.destroy();
      throw e;
    }
    const all = new Uint8Array(staging.getMappedRange(0, Math.max(4, total)).slice(0));
    staging.unmap();
    if (small && this.idleStaging.length < KEPT_STAGING) this.idleStaging.push(staging);
    else staging.destroy();
    at = 0;
    return sources.map((s) => all.subarray(at, (at += s.size)));
  }
}
