/// <reference types="@webgpu/types" />
/**
 * The webgpu device, on any WebGPU implementation: opening takes an adapter from the environment's
 * adapter source (./dawn.ts in Node, ./navigator_adapter.ts in browsers) and requests a device
 * with the adapter's largest buffer limits. Memory is GPUBuffers from the caching allocator; a
 * tensor's bytes sit in its buffer in the dtype's standard little-endian layout (int64 as pairs
 * of u32, float16/bfloat16 two per u32), so uploads and reads are plain byte copies.
 */
import type { Device, Storage } from "../device.js";
import { Allocator } from "./allocator.js";
import { Dispatcher } from "./dispatch.js";
import type { GraphExecutable, GraphSpec } from "../graph.js";
import { compileGraph } from "./graph.js";

let opening: Promise<WebGPUDevice> | undefined;

/** No WebGPU adapter in this environment; the message says what to install or use. */
export class NoAdapterError extends Error {}

/** Codes of the device status block (see WebGPUDevice.status). */
export const STATUS_EMBEDDING = 1;
export const STATUS_GATHER_LINEAR = 2;

class WebGPUStorage implements Storage {
  /** Set right after construction: the allocator ties the buffer's lifetime to this object. */
  handle!: GPUBuffer;
  constructor(readonly device: WebGPUDevice, readonly nbytes: number) {}
}

export class WebGPUDevice implements Device {
  readonly type = "webgpu";
  readonly name = "webgpu";
  /** WGSL lets f32 operations flush subnormals; NVIDIA drivers do (lavapipe does not). */
  readonly flushesSubnormals = "may" as const;
  readonly allocator: Allocator;
  readonly dispatcher: Dispatcher;
  /**
   * Device-side error report, written by kernels that validate data on the GPU (embedding ids,
   * expert indices): [STATUS_* code, value lo, value hi, bound]; checked and cleared at every read.
   */
  readonly status: GPUBuffer;
  private error: string | null = null;
  /** While a graph is recorded: every storage allocated (kernel scratch included), kept for its replays. */
  private retained: Storage[] | null = null;

  constructor(readonly gpu: GPUDevice, readonly adapterName: string) {
    this.allocator = new Allocator(gpu);
    this.dispatcher = new Dispatcher(gpu, this.allocator);
    this.status = gpu.createBuffer({ size: 16, usage: 0x80 | 0x04 | 0x08 });
    gpu.onuncapturederror = (e) => { this.error ??= e.error.message; };
    void gpu.lost.then((info) => { this.error ??= `device lost (${info.reason}): ${info.message}`; });
  }

  allocate(nbytes: number): Storage {
    const storage = new WebGPUStorage(this, nbytes);
    storage.handle = this.allocator.acquire(storage, nbytes);
    this.retained?.push(storage);
    return storage;
  }

  /** Run `fn` keeping every storage it allocates alive (releases are ignored); returns them. */
  retainAllocations(fn: () => void): Storage[] {
    const kept: Storage[] = [];
    this.retained = kept;
    try {
      fn();
    } finally {
      this.retained = null;
    }
    return kept;
  }

  /** A captured graph as one recorded command sequence (./graph.ts). */
  compileGraph(spec: GraphSpec): GraphExecutable {
    return compileGraph(this, spec);
  }

  upload(bytes: Uint8Array): Storage {
    const storage = this.allocate(bytes.byteLength);
    if (bytes.byteLength > 0) {
      const padded = bytes.byteLength % 4 === 0 ? bytes : padTo4(bytes);
      this.gpu.queue.writeBuffer(storage.handle as GPUBuffer, 0, padded.buffer, padded.byteOffset, padded.byteLength);
    }
    return storage;
  }

  async read(storage: Storage, offset: number, nbytes: number): Promise<Uint8Array> {
    const start = offset - (offset % 4);
    const size = Math.ceil((offset + nbytes) / 4) * 4 - start;
    const data = await this.readBack({ buffer: storage.handle as GPUBuffer, offset: start, size: nbytes > 0 ? size : 0 });
    return data.slice(offset - start, offset - start + nbytes);
  }

  async synchronize(): Promise<void> {
    await this.readBack({ buffer: this.status, offset: 0, size: 0 });
  }

  /** Read one buffer range together with the status block, and throw what the device reported. */
  private async readBack(source: { buffer: GPUBuffer; offset: number; size: number }): Promise<Uint8Array> {
    const [data, status] = await this.dispatcher.readBack([source, { buffer: this.status, offset: 0, size: 16 }]);
    this.checkErrors(new Uint32Array(status.slice().buffer));
    return data;
  }

  release(storage: Storage): void {
    if (this.retained) return;
    this.allocator.release(storage, storage.handle as GPUBuffer);
  }

  private checkErrors(status: Uint32Array): void {
    if (this.error) {
      const message = this.error;
      this.error = null;
      throw new Error(`webgpu: ${message}`);
    }
    if (status[0] !== 0) {
      this.gpu.queue.writeBuffer(this.status, 0, new Uint32Array(4));
      const id = BigInt.asIntN(64, (BigInt(status[2]) << 32n) | BigInt(status[1]));
      throw new RangeError(status[0] === STATUS_EMBEDDING
        ? `embedding: index ${id} is out of range for a table of ${status[3]} rows`
        : `gather_linear: expert index ${id} is out of range for ${status[3]} weights`);
    }
  }
}

function padTo4(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
  out.set(bytes);
  return out;
}

/** An adapter's name for messages: its description, else device, else vendor. */
export function adapterName(adapter: GPUAdapter): string {
  const info = adapter.info;
  return info.description || info.device || info.vendor || "unknown adapter";
}

/** Where an environment gets its GPU adapter; throws NoAdapterError when there is none. */
export type AdapterSource = () => Promise<GPUAdapter>;

async function open(requestAdapter: AdapterSource): Promise<WebGPUDevice> {
  const adapter = await requestAdapter();
  const l = adapter.limits;
  const gpu = await adapter.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxBufferSize: l.maxBufferSize,
      maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
      maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
    },
  });
  return new WebGPUDevice(gpu, adapterName(adapter));
}

/**
 * Open the webgpu device (one per process: index 0) on an adapter from `requestAdapter`.
 * Throws NoAdapterError saying what to install.
 */
export function openWebGPU(index: number, requestAdapter: AdapterSource): Promise<WebGPUDevice> {
  if (index !== 0) return Promise.reject(new RangeError(`webgpu:${index}: only one webgpu device (webgpu:0) is supported`));
  opening ??= open(requestAdapter).catch((e) => {
    opening = undefined;
    throw e;
  });
  return opening;
}
