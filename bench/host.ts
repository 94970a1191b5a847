/**
 * The host facts every `npm run bench` number is reported with: the CPU model, the instruction
 * sets the cpu kernels dispatch on, and the memory read bandwidth the kernels' threads get.
 */
import { cpus } from "node:os";
import { native } from "../src/devices/cpu/native.js";

/** Median of a non-empty list. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * CPU model, kernel features ("... kernels=avx512 int8=avx512-vnni bf16=avx512-bf16") and the
 * read bandwidth in bytes/s: the median of `reps` streaming reads of `bytes` (default 1 GiB)
 * split over the cpu thread pool.
 */
export function hostInfo(bytes = 2 ** 30, reps = 5) {
  return {
    cpu: cpus()[0]?.model ?? "unknown",
    features: native().cpuFeatures(),
    threads: native().numThreads(),
    ...readBandwidth(bytes, reps),
  };
}

/**
 * The read bandwidth now, in bytes/s: the median of `reps` streaming reads of `bytes` over the cpu
 * thread pool, and every read in GB/s. On the VMs measured it moves by tens of percent from minute
 * to minute, so a fraction of the bandwidth limit takes the reading made next to its decode runs.
 */
export function readBandwidth(bytes = 2 ** 30, reps = 5) {
  const runs = native().readBandwidth(bytes, reps);
  return { read_bandwidth_bytes_per_s: median(runs), read_bandwidth_runs_gb_per_s: runs.map((r) => +(r / 1e9).toFixed(2)) };
}
