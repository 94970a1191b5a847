/**
 * The cpu device: memory is host memory (Uint8Array over an ArrayBuffer), so uploads of byte
 * views (e.g. weights read from a safetensors file) are used in place and reads are synchronous.
 * Kernels run synchronously in the native addon (./native.ts), on its thread pool.
 */
import type { Device, Storage } from "../device.js";

class CpuStorage implements Storage {
  constructor(readonly device: Device, readonly handle: Uint8Array) {}
  get nbytes(): number { return this.handle.byteLength; }
}

export class CpuDevice implements Device {
  readonly type = "cpu";
  readonly name = "cpu";

  allocate(nbytes: number): Storage {
    // 64-byte alignment of fresh buffers keeps SIMD loads aligned; ArrayBuffers are at least 8-aligned.
    return new CpuStorage(this, new Uint8Array(nbytes));
  }

  upload(bytes: Uint8Array): Storage {
    return new CpuStorage(this, bytes);
  }

  readSync(storage: Storage, offset: number, nbytes: number): Uint8Array {
    return (storage.handle as Uint8Array).subarray(offset, offset + nbytes);
  }

  async read(storage: Storage, offset: number, nbytes: number): Promise<Uint8Array> {
    return this.readSync(storage, offset, nbytes).slice();
  }

  async synchronize(): Promise<void> {}
}
