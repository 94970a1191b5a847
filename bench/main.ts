/**
 * `npm run bench -- --model DIR [--device cpu|webgpu] [--threads N] [--peer-python PATH]`
 * `npm run bench -- --pipeline DIR [--device D] [--steps N] [--sizes HxW,HxW] [--peer-python PATH]`:
 * a diffusers pipeline instead (bench/diffusion.ts).
 * (--threads: the cpu thread pool's size, default TSORCH_NUM_THREADS, else every CPU this process
 * may use; the report's "threads" is the size the pool really has. Bad flags: one line, exit 2.)
 *
 * Measures, on a local checkpoint (nothing is downloaded): prefill tokens/s (prompt 32, batch 1,
 * median of PREFILL_RUNS prompts), decode tokens/s (64 new tokens, batch 1 and batch 8, batch 1
 * compiled: generate({ compile: true }), after one compiling call, and batch 1 sampled:
 * temperature 0.7, top-k 50, top-p 0.9; the first token is excluded), time to first token, peak
 * RSS right after loading the weights and after the run (each also over the checkpoint's size),
 * linear GFLOPS at 1024x1024x1024 (float32 and bfloat16 weights) and GEMV bandwidth at 4096x1024
 * (bfloat16 weights). With --peer-python (a Python with torch and
 * transformers, e.g. from ../shared/tools/reference-venv.sh) it runs the same workload in PyTorch
 * in the same run (bench/peer.py) and prints the ratios tsorch / PyTorch. With --compile it instead
 * runs generate eagerly and compiled (generate({ compile: true }), static KV cache) in the same run,
 * interleaved: prefill tokens/s (prompt 32, from time to first token) and decode tokens/s (200 new
 * tokens, batch 1, greedy), each the best of 2, their ratios, whether the ids are equal, the
 * first (compiling) call's seconds and the compiler's stats. Prints JSON.
 *
 * Also (bench/host.ts): the CPU model, the kernels' instruction sets and the memory read bandwidth
 * (median of 5 streaming reads of 1 GiB over the same threads, at the start and again right
 * before and right after each dtype's decode runs), and for each of `--dtypes` (default: the stored
 * dtype; e.g. auto,int8,int4) the batch-1 decode, eager and compiled, as a fraction of the
 * bandwidth limit (the larger of the two readings next to the dtype's runs / Linear weight bytes
 * read per token; *_run_start_rule: with the start reading in place of the one right before),
 * and after the reading right after them what the dtype's decode GEMV kernels stream alone
 * (decodeKernelReadBandwidth: one call over 1 GiB, and the same bytes in calls of the model's mean
 * decoder-layer Linear size; each also as a fraction of the bandwidth behind the limit: a rough
 * reference for the decode fraction, since the readings move within seconds) and with their weight
 * in cache (decodeKernelComputeRate: every thread over its own 256 KiB at once; also as a multiple
 * of that bandwidth, decode_kernel_compute_over_read), and a plain read
 * in the step's own GEMV call sizes beside whole reads (stepReadBandwidth: decode_step_read_*; its
 * fraction of the whole read is about the most a step of those calls could reach with no compute),
 * and how much of the threads' time the host takes away (hostStalls: host_stall_*, each thread
 * spinning on the clock for 0.5 s; host_stall_shared_fraction: the share all threads lost at once,
 * which costs the decode and the read alike);
 * batch-1 decode
 * figures are medians of 3 runs, each after one unmeasured run of the same length (eager since
 * session 10; compiled: its compiling call). `--llamacpp DIR` (a folder with
 * node-llama-cpp installed) adds llama.cpp on the GGUFs in `--gguf-dir` (bench/llamacpp.ts; types
 * `--llamacpp-types`, default bf16,q8_0,q4_0), timed in a child process while this one waits.
 */
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { DecodeWeightFormat } from "./host.js";

const PROMPT = 32, NEW_TOKENS = 64, COMPILE_NEW_TOKENS = 200;
// Prefills measured per figure (the median is reported), as bench/peer.py measures PyTorch's: one
// prefill takes ~0.1 s, and single ones on the VMs measured moved by 1.5x within a run.
const PREFILL_RUNS = 7;
/** The sampled decode's settings (bench/peer.py uses the same): transformers' default top-k with a chat model's temperature and top-p. */
const SAMPLING = { doSample: true, temperature: 0.7, topK: 50, topP: 0.9, seed: 1 };
const USAGE = "usage: npm run bench -- [--model DIR [--dtypes auto,int8,int4] [--llamacpp DIR --gguf-dir DIR [--llamacpp-types bf16,q8_0,q4_0]] | --pipeline DIR [--steps N] [--sizes HxW,HxW]] [--device cpu|webgpu] [--threads N] [--peer-python PATH] [--compile]";
const DTYPES = ["auto", "float32", "bfloat16", "float16", "int8", "int4"];

/** Print a one-line error and the usage, exit 2. */
function usageError(message: string): never {
  process.stderr.write(`bench: error: ${message}\n${USAGE}\n`);
  process.exit(2);
}

/** The flags, validated before anything is loaded or measured. */
function parseFlags() {
  let values;
  try {
    ({ values } = parseArgs({
      options: { model: { type: "string" }, device: { type: "string", default: "cpu" }, threads: { type: "string" }, "peer-python": { type: "string" }, pipeline: { type: "string" },
        steps: { type: "string" }, sizes: { type: "string" }, compile: { type: "boolean" },
        dtypes: { type: "string", default: "auto" }, llamacpp: { type: "string" }, "gguf-dir": { type: "string" }, "llamacpp-types": { type: "string", default: "bf16,q8_0,q4_0" } },
    }));
  } catch (e) {
    usageError((e as Error).message.replace(/\s*\n\s*/g, " "));
  }
  if (values.device !== "cpu" && values.device !== "webgpu") usageError(`--device must be cpu or webgpu, got '${values.device}'`);
  if (values.threads !== undefined && !/^[1-9][0-9]*$/.test(values.threads)) usageError(`--threads expects a positive integer, got '${values.threads}'`);
  if (values.model !== undefined && !(existsSync(values.model) && statSync(values.model).isDirectory())) usageError(`--model: no such folder: ${values.model}`);
  if (values["peer-python"] !== undefined && values.model === undefined && values.pipeline === undefined) usageError("--peer-python needs --model or --pipeline");
  if (values.pipeline !== undefined && !(existsSync(values.pipeline) && statSync(values.pipeline).isDirectory())) usageError(`--pipeline: no such folder: ${values.pipeline}`);
  if (values.pipeline !== undefined && values.model !== undefined) usageError("--pipeline and --model are separate benchmarks; give one");
  if (values.steps !== undefined && !/^[1-9][0-9]*$/.test(values.steps)) usageError(`--steps expects a positive integer, got '${values.steps}'`);
  if (values.sizes !== undefined && !/^\d+x\d+(,\d+x\d+)*$/.test(values.sizes)) usageError(`--sizes expects HxW[,HxW...], got '${values.sizes}'`);
  if ((values.steps !== undefined || values.sizes !== undefined) && values.pipeline === undefined) usageError("--steps and --sizes need --pipeline");
  if (values.compile && values.model === undefined && values.pipeline === undefined) usageError("--compile needs --model or --pipeline");
  if (values.compile && values["peer-python"] !== undefined && values.model !== undefined) usageError("--compile and --peer-python measure different things; pass one");
  const bad = values.dtypes!.split(",").find((d) => !DTYPES.includes(d));
  if (bad !== undefined) usageError(`--dtypes: unknown dtype '${bad}' (expected a comma-separated list of ${DTYPES.join(", ")})`);
  if (values.llamacpp !== undefined && (values.model === undefined || values["gguf-dir"] === undefined)) usageError("--llamacpp needs --model and --gguf-dir");
  return { ...values, device: values.device as string };
}

const values = parseFlags();
// An explicit --threads wins over TSORCH_NUM_THREADS; the pool reads it when the addon loads.
if (values.threads !== undefined) process.env.TSORCH_NUM_THREADS = values.threads;
const tsorch = await import("../src/index.js");
const { decodeStepCallBytes, decodeWeightBytesPerToken, linearWeightBytes, namedLinears } = await import("./decode_step.js");
const { decodeKernelComputeRate, decodeKernelReadBandwidth, hostInfo, hostStalls, median, readBandwidth, stepReadBandwidth } = await import("./host.js");
const { llamaCppPeer } = await import("./llamacpp.js");
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { native } = await import("../src/devices/cpu/native.js");
/** The cpu thread pool's real size (kernels on cpu, host work on webgpu). */
const threads = native().numThreads();

function randomIds(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) % vocab));
}

async function timeLinear(x: InstanceType<typeof tsorch.Tensor>, w: InstanceType<typeof tsorch.Tensor>, reps: number): Promise<number> {
  await tsorch.linear(x, w).data();
  const t0 = performance.now();
  let y = x;
  for (let i = 0; i < reps; i++) y = tsorch.linear(x, w);
  await y.data();
  return (performance.now() - t0) / 1000 / reps;
}

async function kernels(device: string) {
  const rand = (shape: number[], dtype: string) => tsorch.tensor(Float32Array.from({ length: shape[0] * shape[1] }, () => Math.random() - 0.5), { shape }).to(device, dtype);
  const x = rand([1024, 1024], "float32");
  const gemm = (w: InstanceType<typeof tsorch.Tensor>) => timeLinear(x, w, 5).then((s) => (2 * 1024 ** 3) / s / 1e9);
  const gemv = await timeLinear(rand([1, 1024], "float32"), rand([4096, 1024], "bfloat16"), 200);
  return {
    gemm_1024_gflops_f32: await gemm(rand([1024, 1024], "float32")),
    gemm_1024_gflops_bf16: await gemm(rand([1024, 1024], "bfloat16")),
    gemv_4096x1024_bf16_gb_per_s: (4096 * 1024 * 2) / gemv / 1e9,
  };
}

async function modelBench(dir: string, device: string, dtype = "auto") {
  const model = await AutoModelForCausalLM.fromPretrained(dir, { device, dtype: dtype as "auto" });
  // The high-water mark so far: the process start plus loading (each weight read once into host memory).
  const loadPeakRss = process.resourceUsage().maxRSS * 1024;
  const vocab = (model.config.vocab_size as number) ?? 32000;
  const opts = { maxNewTokens: NEW_TOKENS, doSample: false, eosTokenId: [] as number[] };
  const decode = async (batch: number, compile = false, sampled = false) => {
    const ids = Array.from({ length: batch }, (_, b) => randomIds(PROMPT, vocab, 7 + b));
    const t0 = performance.now();
    let first = 0, steps = 0;
    for await (const _ of model.generateStream(ids, { ...opts, compile, ...(sampled ? SAMPLING : {}) })) {
      if (steps++ === 0) first = performance.now();
    }
    const end = performance.now();
    return { ttft: (first - t0) / 1000, rate: (batch * (steps - 1)) / ((end - first) / 1000) };
  };
  // Warm-up at the measured prompt length, as the PyTorch peer warms up (bench/peer.py): first
  // touches of the buffers of these shapes are not part of a prefill.
  await model.generate(randomIds(PROMPT, vocab, 1), { maxNewTokens: 2, eosTokenId: [] });
  const prefills: number[] = [];
  for (let r = 0; r < PREFILL_RUNS; r++) {
    const t0 = performance.now();
    await model.logits([randomIds(PROMPT, vocab, 3 + r)]).narrow(1, PROMPT - 1, 1).data();
    prefills.push(PROMPT / ((performance.now() - t0) / 1000));
  }
  const prefill = median(prefills);
  // The same prompt as generate's prefill computes it: logits of the last position only (lm_head on 1 row).
  const prefillsLast: number[] = [];
  for (let r = 0; r < PREFILL_RUNS; r++) {
    const ids = randomIds(PROMPT, vocab, 3 + r), t0 = performance.now();
    await model.forward({ inputIds: model.idsTensor([ids]), positionIds: [ids.map((_, i) => i)], attentionMask: null, cache: null, logitsToKeep: 1 }).data();
    prefillsLast.push(PROMPT / ((performance.now() - t0) / 1000));
  }
  // Batch-1 decode, eager then compiled (static cache, one graph per step; the first call
  // compiles): each the median of 3 runs after one unmeasured run of the same length, as the
  // compiled runs follow their compiling call: V8 optimizes the decode loop's JavaScript during
  // the first full-length eager generate (its tokens ~1.6x slower than later runs'; the 2-token
  // warm-up above is too short for that).
  // The bandwidth right before this dtype's decode runs (on a cpu): read before the unmeasured
  // run, since mapping and reading a fresh 1 GiB buffer slowed the decode right after it (int4:
  // 67 tok/s, then 92 and 96).
  const before = device === "cpu" ? readBandwidth() : null;
  await decode(1);
  const b1 = await medianDecode(() => decode(1));
  const b8 = await decode(8);
  await decode(1, true);
  const c1 = await medianDecode(() => decode(1, true));
  await decode(1, false, true);
  const s1 = await medianDecode(() => decode(1, false, true));
  // And right after them; then what this dtype's decode GEMV kernels stream with nothing else of
  // a step between them, in calls of the model's mean decoder-layer Linear size (after the runs:
  // it maps and reads 1 GiB). Not for weights in a Hub quantization format (their own kernels).
  const bandwidth = device === "cpu" ? readBandwidth() : null;
  const named = namedLinears(model);
  const linears = named.map(([, m]) => m);
  // Bytes of each Linear's weight; together, what one decode step reads.
  const linearBytes = linears.map(linearWeightBytes);
  let kernelRead = null;
  if (device === "cpu" && !linears.some((m) => m.hub)) {
    // Every Linear but the largest (the LM head).
    const layerBytes = [...linearBytes].sort((a, b) => a - b).slice(0, -1);
    const callBytes = layerBytes.reduce((a, b) => a + b, 0) / Math.max(1, layerBytes.length);
    const format = (dtype === "auto" ? model.dtype : dtype) as DecodeWeightFormat;
    kernelRead = { ...decodeKernelReadBandwidth(format, callBytes), ...decodeKernelComputeRate(format) };
  }
  // The plain read in this step's own call sizes: about the most a step of these calls could
  // stream (dense models only: decodeStepCallBytes is null for Hub and MoE weights).
  const stepCalls = decodeStepCallBytes(named);
  const stepRead = device === "cpu" && stepCalls ? stepReadBandwidth(stepCalls) : null;
  // How much of the threads' time the host took away just now (a VM's own tick, other tenants).
  const stalls = device === "cpu" ? hostStalls() : null;
  return {
    prefill_tokens_per_s: prefill,
    prefill_logits_to_keep_1_tokens_per_s: median(prefillsLast),
    prefill_logits_to_keep_1_tokens_per_s_runs: prefillsLast,
    decode_tokens_per_s_batch1: b1.rate,
    decode_tokens_per_s_batch8: b8.rate,
    decode_tokens_per_s_batch1_compiled: c1.rate,
    decode_tokens_per_s_batch1_sampled: s1.rate,
    time_to_first_token_s: b1.ttft,
    load_peak_rss_bytes: loadPeakRss,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
    dtype: dtype === "auto" ? model.dtype : dtype,
    // A MoE token reads only its routed experts; null (no limit) where that cannot be counted.
    weight_bytes_per_token: decodeWeightBytesPerToken(model, named) ?? NaN,
    decode_tokens_per_s_batch1_runs: b1.runs,
    decode_tokens_per_s_batch1_compiled_runs: c1.runs,
    ...bandwidth,
    read_bandwidth_before_decode_bytes_per_s: before?.read_bandwidth_bytes_per_s,
    read_bandwidth_before_decode_runs_gb_per_s: before?.read_bandwidth_runs_gb_per_s,
    ...kernelRead,
    ...stalls,
    ...(stepRead && stepCalls && {
      decode_step_calls: stepCalls.length,
      decode_step_read_bytes_per_s: stepRead.step_read_bytes_per_s,
      decode_step_read_runs_gb_per_s: stepRead.step_read_runs_gb_per_s,
      decode_step_read_whole_runs_gb_per_s: stepRead.step_read_whole_runs_gb_per_s,
      decode_step_read_fraction_of_read: stepRead.step_read_fraction_of_read,
    }),
  };
}

/** `runs` batch-1 decodes: the median tokens/s (and time to first token) and every run's tokens/s. */
async function medianDecode(run: () => Promise<{ rate: number; ttft: number }>, runs = 3) {
  const out: { rate: number; ttft: number }[] = [];
  for (let r = 0; r < runs; r++) out.push(await run());
  return { rate: median(out.map((o) => o.rate)), ttft: median(out.map((o) => o.ttft)), runs: out.map((o) => o.rate) };
}

if (values.pipeline) {
  const { parseSizes, pipelineBench } = await import("./diffusion.js");
  const opts = { steps: values.steps ? Number(values.steps) : undefined, sizes: values.sizes ? parseSizes(values.sizes) : undefined, peerPython: values["peer-python"], compile: values.compile };
  console.log(JSON.stringify({ device: values.device, threads, pipeline_dir: path.resolve(values.pipeline), ...(await pipelineBench(values.pipeline, values.device, threads, opts)) }, null, 2));
  process.exit(0);
}
/** generate eagerly and compiled, interleaved in one run (see the file comment). */
async function compiledAgainstEager(model: Awaited<ReturnType<typeof AutoModelForCausalLM.fromPretrained>>, vocab: number) {
  const NEW = COMPILE_NEW_TOKENS, ids = randomIds(PROMPT, vocab, 11);
  const run = async (compile: boolean, maxNewTokens = NEW) => {
    const t0 = performance.now();
    let first = 0, steps = 0;
    const out: number[] = [];
    for await (const [t] of model.generateStream(ids, { maxNewTokens, doSample: false, eosTokenId: [], compile })) {
      if (steps++ === 0) first = performance.now();
      out.push(t);
    }
    const end = performance.now();
    return { prefill: PROMPT / ((first - t0) / 1000), decode: (steps - 1) / ((end - first) / 1000), seconds: (end - t0) / 1000, out };
  };
  tsorch.compiler.reset();
  // The first call compiles the prompt bucket's graph and the decode graph (cache capacity 256, as for 200 tokens).
  const firstCall = await run(true, NEW / 2);
  const eager: Awaited<ReturnType<typeof run>>[] = [], compiled: typeof eager = [];
  for (let rep = 0; rep < 2; rep++) {
    eager.push(await run(false));
    compiled.push(await run(true));
  }
  const best = (rs: typeof eager, k: "prefill" | "decode") => Math.max(...rs.map((r) => r[k]));
  const e = { prefill_tokens_per_s: best(eager, "prefill"), decode_tokens_per_s: best(eager, "decode") };
  const c = { prefill_tokens_per_s: best(compiled, "prefill"), decode_tokens_per_s: best(compiled, "decode") };
  return {
    eager: e, compiled: c,
    speedup_prefill: c.prefill_tokens_per_s / e.prefill_tokens_per_s,
    speedup_decode: c.decode_tokens_per_s / e.decode_tokens_per_s,
    greedy_ids_equal: compiled.every((r) => r.out.join() === eager[0].out.join()) && eager[0].out.join().startsWith(firstCall.out.join()),
    first_compiled_call_s: firstCall.seconds,
    stats: tsorch.compiler.stats(),
  };
}

const host = hostInfo();
const report: Record<string, unknown> = { device: values.device, threads, prompt: PROMPT, new_tokens: values.compile ? COMPILE_NEW_TOKENS : NEW_TOKENS, host };
if (values.device !== "cpu") await tsorch.openDevice(values.device);
if (values.compile) {
  report.model = path.resolve(values.model!);
  const model = await AutoModelForCausalLM.fromPretrained(values.model!, { device: values.device });
  report.tsorch = { compile: await compiledAgainstEager(model, (model.config.vocab_size as number) ?? 32000) };
} else {
  if (values.model) {
    report.model = path.resolve(values.model);
    const dtypes = values.dtypes!.split(",");
    const byDtype: Record<string, Record<string, unknown>> = {};
    for (const d of dtypes) {
      const r = await modelBench(values.model, values.device!, d);
      // The limit takes the larger of the two readings next to the dtype's decode runs (right
      // before and right after them): a reading can come out low (2-19 GB/s against ~60 in a
      // process just done loading a bfloat16 model, on the VM measured), and a low bandwidth would
      // overstate the fraction. The VM's bandwidth also drifts by tens of percent within minutes,
      // so the run's first reading, taken minutes earlier, is kept out of it; the fractions by the
      // rule used through session 14 (the larger of that first reading and the one after the
      // runs) are printed too (*_run_start_rule).
      const larger = (...bs: (number | undefined)[]) => {
        const ok = bs.filter((b): b is number => b !== undefined && Number.isFinite(b) && b > 0);
        return ok.length ? Math.max(...ok) : NaN;
      };
      const bandwidth = larger(r.read_bandwidth_before_decode_bytes_per_s, r.read_bandwidth_bytes_per_s);
      const limit = bandwidth / r.weight_bytes_per_token;
      // (No readings next to the runs, as on webgpu: no limit by either rule.)
      const startLimit = r.read_bandwidth_bytes_per_s === undefined ? NaN : larger(host.read_bandwidth_bytes_per_s, r.read_bandwidth_bytes_per_s) / r.weight_bytes_per_token;
      byDtype[d] = {
        ...r, bandwidth_for_limit_bytes_per_s: bandwidth, bandwidth_limit_tokens_per_s: limit, decode_batch1_fraction_of_limit: r.decode_tokens_per_s_batch1 / limit,
        decode_batch1_compiled_fraction_of_limit: r.decode_tokens_per_s_batch1_compiled / limit,
        // The kernels alone against the same bandwidth as the decode fractions.
        decode_kernel_read_one_call_fraction_of_read: (r.decode_kernel_read_one_call_bytes_per_s ?? NaN) / bandwidth,
        decode_kernel_read_calls_fraction_of_read: (r.decode_kernel_read_calls_bytes_per_s ?? NaN) / bandwidth,
        // The kernels with W in cache, as a multiple of the same bandwidth.
        decode_kernel_compute_over_read: (r.decode_kernel_compute_bytes_per_s ?? NaN) / bandwidth,
        decode_batch1_fraction_of_limit_run_start_rule: r.decode_tokens_per_s_batch1 / startLimit,
        decode_batch1_compiled_fraction_of_limit_run_start_rule: r.decode_tokens_per_s_batch1_compiled / startLimit,
      };
    }
    report.tsorch = byDtype[dtypes[0]];
    if (dtypes.length > 1) report.tsorch_dtypes = byDtype;
  }
  report.tsorch = { ...(report.tsorch as object), ...(await kernels(values.device!)) };
}
if (values["peer-python"]) {
  const peerScript = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../bench/peer.py");
  const out = execFileSync(values["peer-python"], [peerScript, values.model!, String(threads), String(PROMPT), String(NEW_TOKENS)], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const peer = JSON.parse(out.trim().split("\n").at(-1)!);
  report.pytorch = peer;
  const mine = report.tsorch as Record<string, number>;
  report.ratio_tsorch_over_pytorch = Object.fromEntries(
    Object.keys(mine).filter((k) => typeof peer[k] === "number").map((k) => [k, mine[k] / peer[k]]),
  );
}
if (values.llamacpp) {
  const peer = llamaCppPeer(values.llamacpp, values["gguf-dir"]!, values["llamacpp-types"]!.split(","), threads, NEW_TOKENS);
  report.llamacpp = peer;
  const mine = (report.tsorch_dtypes ?? { [values.dtypes!.split(",")[0]]: report.tsorch }) as Record<string, Record<string, number>>;
  const pairs: [string, string][] = [["auto", "bf16"], ["bfloat16", "bf16"], ["int8", "q8_0"], ["int4", "q4_0"]];
  report.ratio_tsorch_over_llamacpp = Object.fromEntries(pairs.filter(([d, t]) => mine[d] && typeof peer[t]?.decode_tok_s === "number").map(([d, t]) => [
    `${d}/${t}`, {
      // llama.cpp's prompt evaluation computes the last token's logits, as generate's prefill does.
      prefill: mine[d].prefill_logits_to_keep_1_tokens_per_s / (peer[t].prefill_tok_s as number),
      prefill_all_logits: mine[d].prefill_tokens_per_s / (peer[t].prefill_tok_s as number),
      decode_batch1: mine[d].decode_tokens_per_s_batch1 / (peer[t].decode_tok_s as number),
      decode_batch1_compiled: mine[d].decode_tokens_per_s_batch1_compiled / (peer[t].decode_tok_s as number),
    },
  ]));
}
if (values.model && !values.compile) {
  const { readdirSync } = await import("node:fs");
  const size = readdirSync(values.model).filter((f) => f.endsWith(".safetensors")).reduce((s, f) => s + statSync(path.join(values.model!, f)).size, 0);
  report.checkpoint_bytes = size;
  report.load_peak_rss_over_checkpoint = ((report.tsorch as Record<string, number>).load_peak_rss_bytes) / size;
  report.peak_rss_over_checkpoint = ((report.tsorch as Record<string, number>).peak_rss_bytes) / size;
}
console.log(JSON.stringify(report, null, 2));
