/**
 * What a backend provides to be a device: memory (allocate, upload, read back) and a sync point.
 * Kernels are registered separately, per op, in ./kernels.ts. Everything above devices/ talks to a
 * device only through this interface and the kernel registry.
 */
import type { GraphExecutable, GraphSpec } from "./graph.js";

/** A block of device memory. `handle` is backend-specific (cpu: a Uint8Array; webgpu: a GPUBuffer). */
export interface Storage {
  readonly device: Device;
  readonly handle: unknown;
  readonly nbytes: number;
}

/**
 * Storage for weights that live together (one model's): a device may pack them into shared blocks
 * of memory, each freed once no storage in it is referenced any more. `Device.release` takes its
 * storages as any other (pass one only once nothing uses it): a device never reuses memory that
 * another live storage shares (cpu: a view of a shared block is never pooled; a request of 2 MB
 * or more gets a buffer of its own, which release may pool for a later `allocate`, as it does any
 * buffer).
 */
export interface WeightArena {
  /** The device its storages live on. */
  readonly device: Device;
  /** `nbytes` of uninitialised memory, aligned to at least 64 bytes. */
  allocate(nbytes: number): Storage;
}

export interface Device {
  /** Backend type, e.g. "cpu" or "webgpu": the key kernels are registered under. */
  readonly type: string;
  /** Full name, e.g. "cpu" or "webgpu:0"; what `tensor.device.name` prints. */
  readonly name: string;
  /**
   * "may": float32 arithmetic on this device may flush subnormal inputs and outputs of each
   * operation to (sign-preserving) zero, as WGSL allows (WGSL spec, floating-point evaluation);
   * data movement (copies, casts, select) keeps every bit. Absent: exact IEEE-754 subnormals (cpu).
   * The conformance runner (src/conformance/flush.ts) reads it; nothing else branches on it.
   */
  readonly flushesSubnormals?: "may";
  /** Allocate `nbytes` of uninitialised memory (nbytes may be 0). */
  allocate(nbytes: number): Storage;
  /**
   * Storage holding `bytes`. A backend whose memory is host memory may use the bytes in place
   * (no copy): the caller hands them over and must not modify them afterwards.
   */
  upload(bytes: Uint8Array): Storage;
  /** Copy `nbytes` starting at byte `offset` of `storage` to the host, after pending work ends. */
  read(storage: Storage, offset: number, nbytes: number): Promise<Uint8Array>;
  /** Synchronous read, for devices whose memory the host can read directly (cpu). */
  readSync?(storage: Storage, offset: number, nbytes: number): Uint8Array;
  /**
   * Optional, for devices whose kernels run synchronously on host memory (cpu): overwrite
   * `bytes.byteLength` bytes of `storage` from byte `offset`, now (no kernel is in flight to
   * read the old ones). Throws RangeError when the bytes do not fit.
   */
  writeSync?(storage: Storage, offset: number, bytes: Uint8Array): void;
  /** Wait until all work enqueued on this device has finished. */
  synchronize(): Promise<void>;
  /** Optional: give memory back early (otherwise the garbage collector frees it). */
  release?(storage: Storage): void;
  /**
   * Optional: prepare a captured graph (compile/) to run this device's way, e.g. as one recorded
   * command sequence. Without it, graphs run through `replayKernels` (./graph.ts).
   */
  compileGraph?(spec: GraphSpec): GraphExecutable;
  /**
   * Optional: true when kernels compute on uploaded host bytes in place (cpu), so weights that
   * will be used as stored are best read into this device's own memory (which may sit on huge
   * pages) rather than left in a file mapping; model loading then reads checkpoints
   * (hub/safetensors.ts loadCheckpoint, `readWeights`).
   */
  readonly hostMemoryWeights?: boolean;
  /**
   * Optional: a fresh arena for a set of weights made on this device (cpu: quantized weights
   * packed into huge-page blocks, see cpu/weight_arena.ts). Without it, weights use `allocate`.
   */
  weightArena?(): WeightArena;
}
