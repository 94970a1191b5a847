/// <reference types="@webgpu/types" />
/**
 * The webgpu caching allocator. GPU buffers are created in size classes (at most 1/8 wasted) and
 * recycled: a buffer is freed when its Storage is garbage-collected (FinalizationRegistry) or
 * released explicitly. A freed buffer may still be read or written by commands that were recorded
 * but not submitted yet, so it waits in `pending` until the next submit; only then may a new owner
 * write it (e.g. with queue.writeBuffer, which runs ahead of unsubmitted commands).
 */

/** GPUBufferUsage STORAGE | COPY_SRC | COPY_DST (numeric: Dawn's globals are not installed). */
const USAGE = 0x80 | 0x04 | 0x08;
/** Free bytes kept for reuse; buffers freed beyond this are destroyed. */
const CACHE_LIMIT = 1 << 30;

/** The size class of a request: a multiple of 256 bytes, rounded up by at most 1/8. */
export function sizeClass(nbytes: number): number {
  if (nbytes <= 256) return 256;
  const grain = Math.max(256, 2 ** Math.floor(Math.log2(nbytes)) / 8);
  return Math.ceil(nbytes / grain) * grain;
}

export class Allocator {
  private readonly free = new Map<number, GPUBuffer[]>();
  private pending: GPUBuffer[] = [];
  private cachedBytes = 0;
  private readonly registry = new FinalizationRegistry<GPUBuffer>((buffer) => this.pending.push(buffer));

  constructor(private readonly device: GPUDevice) {}

  /** A buffer of at least `nbytes`, owned by `owner` until it is collected or released. */
  acquire(owner: object, nbytes: number): GPUBuffer {
    const size = sizeClass(nbytes);
    const limit = this.device.limits.maxStorageBufferBindingSize;
    if (size > limit) {
      throw new RangeError(`webgpu: a tensor of ${nbytes} bytes exceeds this adapter's largest storage buffer binding (${limit} bytes)`);
    }
    let buffer = this.free.get(size)?.pop();
    if (buffer) this.cachedBytes -= size;
    else buffer = this.device.createBuffer({ size, usage: USAGE });
    this.registry.register(owner, buffer, owner);
    return buffer;
  }

  /** Free `owner`'s buffer now instead of at garbage collection. */
  release(owner: object, buffer: GPUBuffer): void {
    if (this.registry.unregister(owner)) this.pending.push(buffer);
  }

  /** Called after every submit: buffers freed before it become reusable (or are destroyed). */
  submitted(): void {
    for (const buffer of this.pending) {
      if (this.cachedBytes + buffer.size > CACHE_LIMIT) {
        buffer.destroy();
        continue;
      }
      let list = this.free.get(buffer.size);
      if (!list) this.free.set(buffer.size, (list = []));
      list.push(buffer);
      this.cachedBytes += buffer.size;
    }
    this.pending = [];
  }
}
