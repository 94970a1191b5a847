/**
 * Weight arenas of the cpu device (Device.weightArena): a model's block-quantized weights are
 * 0.3–1.5 MB each, below HUGE_PAGE_MIN_BYTES, so allocated one by one they sit on 4 KB pages. A
 * batch-1 decode step streams every weight once, and streaming from 4 KB pages is slower (the
 * hardware prefetchers stop at each page, every page costs a TLB miss): on the host measured (AMD
 * EPYC Zen 5, 2 threads, the Qwen3-0.6B-shaped int4 layer GEMVs) the same weights packed into
 * 2 MB-page blocks read ~10% faster. An arena sub-allocates from blocks of BLOCK_BYTES taken from
 * allocateHost (huge pages); each storage is a view of its block, so a block is unmapped once the
 * collector finds no view of it (a tensor keeps its block alive by itself, whatever happens to
 * its neighbours). Views never equal a whole block, so the device's free pool never takes them;
 * a request of HUGE_PAGE_MIN_BYTES or more gets a whole buffer of its own, which CpuDevice.release
 * pools as it does any buffer (the WeightArena contract, devices/device.ts).
 */
import type { Device, Storage, WeightArena } from "../device.js";
import { allocateHost, HUGE_PAGE_MIN_BYTES } from "./host_memory.js";

/** Size of an arena's blocks (a multiple of the 2 MB huge page). */
export const BLOCK_BYTES = 32 * 1024 * 1024;
const ALIGN = 64;

/** A WeightArena over host memory: requests under HUGE_PAGE_MIN_BYTES share blocks, larger ones get their own buffer. */
export class CpuWeightArena implements WeightArena {
  private block: Uint8Array | null = null;
  private used = 0;

  constructor(readonly device: Device, private readonly makeStorage: (bytes: Uint8Array) => Storage) {}

  allocate(nbytes: number): Storage {
    if (nbytes >= HUGE_PAGE_MIN_BYTES) return this.makeStorage(allocateHost(nbytes));
    const start = Math.ceil(this.used / ALIGN) * ALIGN;
    if (!this.block || start + nbytes > this.block.byteLength) {
      this.block = allocateHost(BLOCK_BYTES);
      this.used = 0;
      return this.allocate(nbytes);
    }
    this.used = start + nbytes;
    return this.makeStorage(this.block.subarray(start, start + nbytes));
  }
}
