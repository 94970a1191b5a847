/**
 * The cpu device: memory is host memory (Uint8Array over an ArrayBuffer), so uploads of byte
 * views (e.g. weights read from a safetensors file) are used in place and reads are synchronous.
 * Kernels run synchronously in the native addon (./native.ts), on its thread pool.
 */
import type { Device, Storage, WeightArena } from "../device.js";
import type { GraphExecutable, GraphSpec } from "../graph.js";
import { compileCpuGraph } from "./graph.js";
import { allocateHost } from "./host_memory.js";
import { CpuWeightArena } from "./weight_arena.js";

class CpuStorage implements Storage {
  constructor(readonly device: Device, readonly handle: Uint8Array) {}
  get nbytes(): number { return this.handle.byteLength; }
}

/** Buffers smaller than this are left to the garbage collector rather than pooled. */
const POOL_MIN_BYTES = 4096;
/**
 * Most bytes the free pool holds; beyond it, the buffers of the size least recently released go
 * to the collector. A serving decode step of 32 sequences on a 0.6B model releases ~125 MiB, all
 * reused by the next step, even after a prefill step released buffers of other sizes.
 */
const POOL_MAX_BYTES = 256 * 1024 * 1024;

export class CpuDevice implements Device {
  readonly type = "cpu";
  readonly name = "cpu";
  /** Weights are computed on in place: loading reads them into allocateHost memory (huge pages). */
  readonly hostMemoryWeights = true;
  /**
   * Released buffers by size, reused by `allocate` (filled by tidy scopes, see tensor/scope.ts),
   * with when their size was last released (a count of releases): past POOL_MAX_BYTES, the sizes
   * least recently released leave first. (An eager decode step releases ~170 buffers: the order is
   * kept by a stamp, not by re-inserting the size into the map on every release.)
   */
  private readonly pool = new Map<number, { buffers: Uint8Array[]; released: number }>();
  private pooledBytes = 0;
  private releases = 0;

  allocate(nbytes: number): Storage {
    const reused = this.pool.get(nbytes)?.buffers.pop();
    if (reused) {
      this.pooledBytes -= nbytes;
      return new CpuStorage(this, reused);
    }
    return new CpuStorage(this, allocateHost(nbytes));
  }

  release(storage: Storage): void {
    const bytes = storage.handle as Uint8Array;
    const n = bytes.byteLength;
    if (n < POOL_MIN_BYTES || n > POOL_MAX_BYTES || bytes.byteOffset !== 0 || bytes.buffer.byteLength !== n) return;
    let size = this.pool.get(n);
    if (!size) this.pool.set(n, (size = { buffers: [], released: 0 }));
    size.buffers.push(bytes);
    size.released = ++this.releases;
    this.pooledBytes += n;
    if (this.pooledBytes > POOL_MAX_BYTES) this.evict();
  }

  /** Drop pooled buffers, the sizes least recently released first, until the pool is within POOL_MAX_BYTES. */
  private evict(): void {
    for (const [n, size] of [...this.pool].sort((a, b) => a[1].released - b[1].released)) {
      if (this.pooledBytes <= POOL_MAX_BYTES) break;
      while (size.buffers.length && this.pooledBytes > POOL_MAX_BYTES) size.buffers.pop(), this.pooledBytes -= n;
      if (!size.buffers.length) this.pool.delete(n);
    }
  }

  /** Quantized weights packed into huge-page blocks (./weight_arena.ts). */
  weightArena(): WeightArena {
    return new CpuWeightArena(this, (bytes) => new CpuStorage(this, bytes));
  }

  upload(bytes: Uint8Array): Storage {
    return new CpuStorage(this, bytes);
  }

  readSync(storage: Storage, offset: number, nbytes: number): Uint8Array {
    return (storage.handle as Uint8Array).subarray(offset, offset + nbytes);
  }

  writeSync(storage: Storage, offset: number, bytes: Uint8Array): void {
    if (!Number.isInteger(offset) || offset < 0 || offset + bytes.byteLength > storage.nbytes) {
      throw new RangeError(`writeSync: ${bytes.byteLength} bytes at offset ${offset} do not fit a storage of ${storage.nbytes} bytes`);
    }
    (storage.handle as Uint8Array).set(bytes, offset);
  }

  async read(storage: Storage, offset: number, nbytes: number): Promise<Uint8Array> {
    return this.readSync(storage, offset, nbytes).slice();
  }

  async synchronize(): Promise<void> {}

  /** A captured graph as a recorded list of addon calls (./graph.ts). */
  compileGraph(spec: GraphSpec): GraphExecutable {
    return compileCpuGraph(spec);
  }
}
