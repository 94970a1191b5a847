/**
 * The host facts every `npm run bench` number is reported with: the CPU model, the instruction
 * sets the cpu kernels dispatch on, and the memory read bandwidth the kernels' threads get.
 */
import { cpus } from "node:os";
import { DTYPE_CODE, native } from "../src/devices/cpu/native.js";

/** Rates in bytes/s as GB/s with two decimals (the runs a report lists). */
function gbPerS(rates: number[]): number[] {
  return rates.map((r) => +(r / 1e9).toFixed(2));
}

/** Median of a non-empty list. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * CPU model, kernel features ("... kernels=avx512 int8=avx512-vnni bf16=avx512-bf16
 * clones=x86-64-v4") and the read bandwidth in bytes/s: the median of `reps` streaming reads of
 * `bytes` (default 1 GiB) split over the cpu thread pool.
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
  return { read_bandwidth_bytes_per_s: median(runs), read_bandwidth_runs_gb_per_s: gbPerS(runs) };
}

/**
 * The plain read in a decode step's own call sizes (native readBandwidthInCalls): `reps` passes
 * that read `callBytes` (the step's GEMV calls, in order) one call after another, each right after
 * a whole read of `bytes` (or of the largest call, if more; the calls wrap around the buffer), so
 * that each pass has a reading beside it. About what a step of those calls could stream with no
 * compute, no norms or attention and no JavaScript between them: each call starts a new stream on
 * each thread and ends at a join, which one long read does not. `step_read_fraction_of_read` is
 * the median of the passes' rates over the whole read before each (the host's bandwidth drifts
 * within minutes). Rates in bytes/s. Throws if the memory cannot be had.
 */
export function stepReadBandwidth(callBytes: number[], bytes = 2 ** 30, reps = 5) {
  const r = native().readBandwidthInCalls(Math.round(bytes), reps, callBytes.map((b) => Math.max(1, Math.round(b))));
  if (r.length !== 2 * reps) throw new Error(`stepReadBandwidth: could not have ${bytes} bytes of memory`);
  const whole = r.slice(0, reps), step = r.slice(reps);
  return {
    step_read_bytes_per_s: median(step),
    step_read_runs_gb_per_s: gbPerS(step),
    step_read_whole_runs_gb_per_s: gbPerS(whole),
    step_read_fraction_of_read: median(step.map((v, i) => v / whole[i])),
  };
}

/** Weight formats decodeKernelReadBandwidth streams: a float dtype, or main.ts's --dtype int8 / int4. */
export type DecodeWeightFormat = "float32" | "bfloat16" | "float16" | "int8" | "int4";

/** The kernel probes' (wDtype, bits) for a format: a float weight's dtype code with bits 0, or float32 with 8 / 4. */
function formatCodes(format: DecodeWeightFormat): { wDtype: number; bits: number } {
  const bits = format === "int8" ? 8 : format === "int4" ? 4 : 0;
  return { wDtype: bits ? DTYPE_CODE.float32 : DTYPE_CODE[format as "float32" | "bfloat16" | "float16"], bits };
}

/**
 * The read bandwidth of the batch-1 decode GEMV kernels, in bytes/s (native decodeReadBandwidth):
 * the cpu's linear (a float weight) or linearQuantized (int8 / int4 codes and float32 block scales)
 * with one activation row, K = 1024 (the input size of most of the Qwen3-0.6B-shaped model's weight
 * bytes), over about `bytes` of weight in memory of the kind a model's weights get (2 MB pages where
 * the platform has them), so that W comes from DRAM:
 *   - one call: `reps` single calls over all of it (median, after one untimed call);
 *   - calls: the same bytes as consecutive calls of about `callBytes` each, called from C++ (as a
 *     compiled decode step's nodes are): the Qwen3-0.6B-shaped model's decode GEMVs read 1.3-3.9 MB
 *     a call in int4, 2.4-7.1 in int8, 4.2-12.6 in bfloat16.
 * Bytes of W (codes + scales) / time; the values are arbitrary (the kernels' work does not depend
 * on them). No norms, attention or JavaScript between calls: a reference for what a decode step's
 * GEMVs can stream on this host, to set beside readBandwidth's plain read made next to it. Throws if
 * the memory cannot be had.
 */
export function decodeKernelReadBandwidth(format: DecodeWeightFormat, callBytes = 2 * 2 ** 20, bytes = 2 ** 30, reps = 3) {
  const { wDtype, bits } = formatCodes(format);
  const r = native().decodeReadBandwidth(wDtype, bits, Math.max(1, Math.round(callBytes)), Math.round(bytes), reps);
  if (r.length !== 2 * reps + 1) throw new Error(`decodeKernelReadBandwidth: could not have ${bytes} bytes of memory`);
  const one = r.slice(0, reps), calls = r.slice(reps, 2 * reps);
  return {
    decode_kernel_read_one_call_bytes_per_s: median(one), decode_kernel_read_one_call_runs_gb_per_s: gbPerS(one),
    decode_kernel_read_call_bytes: r[2 * reps],
    decode_kernel_read_calls_bytes_per_s: median(calls), decode_kernel_read_calls_runs_gb_per_s: gbPerS(calls),
  };
}

/**
 * How fast the batch-1 decode GEMV kernels of `format` go where memory does not hold them back, in
 * bytes of weight per second (native decodeComputeRate): every cpu thread calls the kernel (as in
 * decodeKernelReadBandwidth: one activation row, K = 1024) over its own `bytes` of weight (default
 * 256 KiB, within each core's L2 cache on the hosts measured), all threads at once; the median of
 * `reps` rates. For int8 / int4 the kernel runs alone, the activation quantized once per task (a
 * decode step quantizes it once per 1-7 MB call; through session 24 once per 256 KiB call, which
 * put int4 at 0.76-0.84 of the kernel's own rate). Set beside readBandwidth: well above it, the
 * kernels can keep up with memory and a decode step's shortfall lies elsewhere; near it, their
 * compute is what holds a step back. K = 1024 is the input size of most of the Qwen3-0.6B-shaped
 * model's weight bytes; on avx512-vnni its int4 rows take the register-held q4_0 kernel, faster
 * than the one for longer rows (o_proj, down). A rep is a few ms: a thread that loses its CPU for a
 * time slice lowers that rep. Throws if the memory cannot be had.
 */
export function decodeKernelComputeRate(format: DecodeWeightFormat, bytes = 256 * 1024, reps = 5) {
  const { wDtype, bits } = formatCodes(format);
  const r = native().decodeComputeRate(wDtype, bits, Math.round(bytes), reps);
  if (r.length !== reps + 1) throw new Error(`decodeKernelComputeRate: could not have ${bytes} bytes of memory for each of ${native().numThreads()} threads`);
  const runs = r.slice(0, reps);
  return {
    decode_kernel_compute_bytes_per_s: median(runs),
    decode_kernel_compute_runs_gb_per_s: gbPerS(runs),
    decode_kernel_compute_thread_bytes: r[reps],
  };
}

/**
 * How much of its threads' time the host takes away (native hostStalls): every cpu thread spins
 * reading the clock for `seconds`, all at once, and each gap of over `minGapUs` between two reads
 * is time the thread did not run (an interrupt, the hypervisor's tick, another tenant). Per thread
 * (the mean over the threads): gaps per second and the fraction of the time lost; over all threads'
 * gaps (the first 65536 of each thread): the median, 99th percentile and largest, in microseconds,
 * and the fraction of their time that every thread lost at once (`host_stall_shared_fraction`,
 * over the span every thread recorded; null when a thread ran after another's).
 * Time all threads lose together (the whole VM off its cores) costs a decode step and the
 * streaming read behind the bandwidth limit alike, so it leaves the decode fraction of the limit
 * as it is; time one thread loses alone can hold up a step's other threads at its next join (some
 * 200 a token) while the read goes on at their rate (README, "What the host takes away").
 */
export function hostStalls(seconds = 0.5, minGapUs = 2) {
  const r = native().hostStalls(seconds, minGapUs);
  const T = r[0];
  let gaps = 0, lost = 0;
  for (let t = 0; t < T; t++) {
    gaps += r[1 + 2 * t];
    lost += r[2 + 2 * t];
  }
  return {
    host_stall_gaps_per_s: +(gaps / T / seconds).toFixed(1),
    host_stall_time_fraction: +(lost / T / seconds).toFixed(4),
    host_stall_median_us: +r[1 + 2 * T].toFixed(1),
    host_stall_p99_us: +r[2 + 2 * T].toFixed(1),
    host_stall_max_us: +r[3 + 2 * T].toFixed(1),
    host_stall_shared_fraction: Number.isNaN(r[4 + 2 * T]) ? null : +r[4 + 2 * T].toFixed(3),
  };
}
