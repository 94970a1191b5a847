/**
 * Host memory for cpu tensors. The cpu device computes on host memory in place, so buffers that
 * will hold tensor data — the device's own allocations, and checkpoint tensors read from a file
 * (src/hub/safetensors.ts) — come from here, zero-filled. From MAPPED_MIN_BYTES on they are mapped
 * by the native addon (Linux; see native/host_memory.cc) with every page already present, and from
 * HUGE_PAGE_MIN_BYTES on, on transparent huge pages:
 * - a page's first touch faults, and on the host measured (a Firecracker VM, AMD EPYC Zen 5) a fault
 *   costs ~14 us: a decode step writing one position into each layer's fresh KV cache buffers
 *   faulted ~56 times (0.8 ms of a 13 ms int4 token); populated at allocation, ~0.6 us a page;
 * - weights are streamed once per decode step, and on that host the Qwen3-0.6B-shaped bf16 decode
 *   GEMVs read 40 GB/s from 4 KB pages and 48 GB/s from 2 MB pages.
 * Smaller buffers come from V8's allocator, whose heap memory is mostly recycled (already present).
 */
import { native } from "./native.js";

/** Buffers at least this large are mapped (and pre-faulted) by the native addon where possible. */
export const MAPPED_MIN_BYTES = 128 * 1024;

/** Buffers at least this large (one 2 MB page) are allocated on huge pages where possible. */
export const HUGE_PAGE_MIN_BYTES = 2 * 1024 * 1024;

/**
 * A fresh zero-filled buffer of `nbytes`: from MAPPED_MIN_BYTES on with its pages present, from
 * HUGE_PAGE_MIN_BYTES on on huge pages, where the platform allows.
 */
export function allocateHost(nbytes: number): Uint8Array {
  if (nbytes >= MAPPED_MIN_BYTES) {
    let mapped: ArrayBuffer | null = null;
    try {
      mapped = native().allocateHost(nbytes);
    } catch {
      // Without the native addon (a webgpu-only install reading a checkpoint) buffers are
      // ordinary ones: the mapping only changes speed.
    }
    if (mapped) return new Uint8Array(mapped);
  }
  return new Uint8Array(nbytes);
}
