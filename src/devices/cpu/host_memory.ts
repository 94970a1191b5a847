/**
 * Host memory for cpu tensors. The cpu device computes on host memory in place, so buffers that
 * will hold tensor data — the device's own allocations, and checkpoint tensors read from a file
 * that could not be memory-mapped (mapped ones get the same advice in native/mmap.cc) — come
 * from here: zero-filled and, from HUGE_PAGE_MIN_BYTES on, advised for transparent huge pages
 * (Linux) before anything touches them. Weights are streamed once per decode step and read
 * faster from 2 MB pages (see native/huge_pages.cc).
 */
import { native } from "./native.js";

/** Buffers at least this large are advised for huge pages. */
export const HUGE_PAGE_MIN_BYTES = 4 * 1024 * 1024;

/** A fresh zero-filled buffer of `nbytes` (large ones advised for huge pages). */
export function allocateHost(nbytes: number): Uint8Array {
  const bytes = new Uint8Array(nbytes);
  if (nbytes >= HUGE_PAGE_MIN_BYTES) {
    try {
      native().adviseHugePages(bytes);
    } catch {
      // Without the native addon (a webgpu-only install reading a checkpoint) the advice is
      // skipped: it only changes speed.
    }
  }
  return bytes;
}
