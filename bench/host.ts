/**
 * The host facts every `npm run bench` number is reported with: the CPU model, the instruction
 * sets the cpu kernels dispatch on, and the memory read bandwidth the kernels' threads get.
 */
import { cpus } from "node:os";
import { DTYPE_CODE, native } from "../src/devices/cpu/native.js";

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

/** Weight formats decodeKernelReadBandwidth streams: a float dtype, or main.ts's --dtype int8 / int4. */
export type DecodeWeightFormat = "float32" | "bfloat16" | "float16" | "int8" | "int4";

/** decodeKernelReadBandwidth's weight memory, kept for the next call (mapping 1 GiB afresh slowed what ran after it). */
let probeMemory: ArrayBuffer | null = null;

/**
 * The read bandwidth of the batch-1 decode GEMV kernels, in bytes/s: the cpu's linear (a float
 * weight) or linearQuantized (int8 / int4 codes and float32 block scales) with one activation row,
 * K = 1024 (the input size of most of the Qwen3-0.6B-shaped model's weight bytes), over a weight of
 * about `bytes` in 2 MB pages as a model's weights are (allocateHuge), so that W comes from DRAM:
 *   - one_call: `reps` single calls over all of it (median, after one untimed call);
 *   - calls: the same bytes as consecutive calls of about `callBytes` each (a decoder layer's GEMV
 *     size: the Qwen3-0.6B-shaped int4 model's are 1.3-3.9 MB), back to back from JavaScript.
 * Bytes of W (codes + scales) / time. No norms, attention or activation functions between calls:
 * what a decode step's GEMVs could stream at most on this host, to set beside readBandwidth's plain
 * read (the bandwidth limit's denominator). The values are arbitrary: the kernels' work does not
 * depend on them. The memory is mapped on the first call and kept. Throws if the mapping fails.
 */
export function decodeKernelReadBandwidth(format: DecodeWeightFormat, callBytes = 2 * 2 ** 20, bytes = 2 ** 30, reps = 3) {
  const nat = native(), K = 1024;
  const bits = format === "int8" ? 8 : format === "int4" ? 4 : 0;
  const rowBytes = bits ? (K * bits) / 8 + (K / 32) * 4 : K * (format === "float32" ? 4 : 2);
  const n = Math.max(1, Math.floor(callBytes / rowBytes)), calls = Math.max(1, Math.floor(bytes / rowBytes / n)), N = n * calls;
  const weightBytes = N * rowBytes;
  if (!probeMemory || probeMemory.byteLength < weightBytes) probeMemory = nat.allocateHuge(weightBytes);
  if (!probeMemory) throw new Error(`decodeKernelReadBandwidth: could not map ${weightBytes} bytes`);
  const mem = probeMemory, w = new Uint8Array(mem, 0, weightBytes);
  const x = new Uint8Array(Float32Array.from({ length: K }, (_, i) => Math.sin(i)).buffer), out = new Uint8Array(4 * N);
  // gemv(r0, r1): rows [r0, r1) of W into out.
  let gemv: (r0: number, r1: number) => void;
  if (bits) {
    const codeRow = (K * bits) / 8, codes = w.subarray(0, N * codeRow), scales = w.subarray(codes.length);
    codes.fill(0x5a);
    new Float32Array(mem, codes.length, N * (K / 32)).fill(0.01);
    gemv = (r0, r1) => nat.linearQuantized(x, codes.subarray(r0 * codeRow), scales.subarray(r0 * (K / 8)), bits, null, 0, out.subarray(4 * r0), 1, r1 - r0, K);
  } else {
    w.fill(0x3c);
    const code = DTYPE_CODE[format as "float32" | "bfloat16" | "float16"];
    gemv = (r0, r1) => nat.linear(x, w.subarray(r0 * rowBytes), code, null, 0, out.subarray(4 * r0), 1, r1 - r0, K);
  }
  const time = (f: () => void) => {
    const t0 = performance.now();
    f();
    return weightBytes / ((performance.now() - t0) / 1000);
  };
  const oneCall = () => gemv(0, N), layerCalls = () => { for (let c = 0; c < calls; c++) gemv(c * n, (c + 1) * n); };
  oneCall();
  layerCalls();
  const one: number[] = [], layered: number[] = [];
  for (let r = 0; r < reps; r++) {
    one.push(time(oneCall));
    layered.push(time(layerCalls));
  }
  const gb = (rs: number[]) => rs.map((r) => +(r / 1e9).toFixed(2));
  return {
    decode_kernel_read_one_call_bytes_per_s: median(one), decode_kernel_read_one_call_runs_gb_per_s: gb(one),
    decode_kernel_read_call_bytes: n * rowBytes,
    decode_kernel_read_calls_bytes_per_s: median(layered), decode_kernel_read_calls_runs_gb_per_s: gb(layered),
  };
}
