/**
 * Host memory for cpu tensors. The cpu device computes on host memory in place, so buffers that
 * will hold tensor data — the device's own allocations, and checkpoint tensors read from a file
 * (src/hub/safetensors.ts) — come from here, zero-filled. From HUGE_PAGE_MIN_BYTES on they are
 * mapped by the native addon on transparent huge pages (Linux; see native/huge_pages.cc): weights
 * are streamed once per decode step, and on the host measured (AMD EPYC Zen 5, 2 threads) the
 * Qwen3-0.6B-shaped bf16 decode GEMVs read 40 GB/s from 4 KB pages and 48 GB/s from 2 MB pages.
 */
import { native } from "./native.js";

/** Buffers at least this large (one 2 MB page) are allocated on huge pages where possible. */
export const HUGE_PAGE_MIN_BYTES = 2 * 1024 * 1024;

/** A fresh zero-filled buffer of `nbytes` (from HUGE_PAGE_MIN_BYTES on, on huge pages where the platform allows). */
export function allocateHost(nbytes: number): Uint8Array {
  if (nbytes >= HUGE_PAGE_MIN_BYTES) {
    let huge: ArrayBuffer | null = null;
    try {
      huge = native().allocateHuge(nbytes);
    } catch {
      // Without the native addon (a webgpu-only install reading a checkpoint) buffers are
      // ordinary ones: huge pages only change speed.
    }
    if (huge) return new Uint8Array(huge);
  }
  return new Uint8Array(nbytes);
}
