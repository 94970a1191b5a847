/**
 * `npm run bench:prefill -- --model DIR [--device cpu|webgpu] [--threads N] [--lengths 64,512]`
 *
 * How prefill grows with the prompt: for each length, a fresh child process loads the model,
 * runs one prefill of that many random tokens (batch 1, with a cache, as generate's first step)
 * and reports its seconds and memory: peak RSS of the process and the peak RSS added by the
 * prefill over the RSS after loading. Prints JSON with the ratios against the shortest prompt
 * (time per token should stay flat; memory should not grow with the prompt beyond the cache).
 * Bench checkpoint for Qwen3.5: bench/make_qwen3_5_model.py (write it under /tmp).
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    model: { type: "string" }, device: { type: "string", default: "cpu" }, threads: { type: "string", default: "2" },
    lengths: { type: "string", default: "64,512" }, child: { type: "string" },
  },
});
if (!values.model) throw new Error("bench:prefill: --model DIR is required");
const lengths = values.lengths!.split(",").map(Number);
if (lengths.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`bench:prefill: --lengths must be positive integers, got '${values.lengths}'`);
process.env.TSORCH_NUM_THREADS ??= values.threads;

async function child(length: number) {
  const tsorch = await import("../src/index.js");
  const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
  if (values.device !== "cpu") await tsorch.openDevice(values.device!);
  const model = await AutoModelForCausalLM.fromPretrained(values.model!, { device: values.device });
  const vocab = (model.config.vocab_size as number) ?? 32000;
  let s = 12345;
  const ids = Array.from({ length }, () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) % vocab));
  await model.generate([1, 2], { maxNewTokens: 1, eosTokenId: [] }); // warm-up
  const loaded = process.memoryUsage().rss;
  const t0 = performance.now();
  await model.generate(ids, { maxNewTokens: 1, eosTokenId: [] });
  const seconds = (performance.now() - t0) / 1000;
  const peak = process.resourceUsage().maxRSS * 1024;
  console.log(JSON.stringify({ length, seconds, peak_rss_bytes: peak, prefill_added_rss_bytes: Math.max(0, peak - loaded) }));
}

if (values.child) {
  await child(Number(values.child));
} else {
  const self = fileURLToPath(import.meta.url);
  const runs = lengths.map((n) => {
    const out = execFileSync(process.execPath, [self, ...process.argv.slice(2), "--child", String(n)], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
    return JSON.parse(out.trim().split("\n").at(-1)!) as { length: number; seconds: number; peak_rss_bytes: number; prefill_added_rss_bytes: number };
  });
  const base = runs[0];
  console.log(JSON.stringify({
    model: values.model, device: values.device, threads: Number(values.threads), runs,
    vs_shortest: runs.map((r) => ({
      length: r.length,
      length_ratio: r.length / base.length,
      time_ratio: r.seconds / base.seconds,
      peak_rss_ratio: r.peak_rss_bytes / base.peak_rss_bytes,
    })),
  }, null, 2));
}
