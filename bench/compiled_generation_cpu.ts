/**
 * Eager against compiled generation of one model on cpu, interleaved in one process (greedy,
 * batch 1, the bench's 32-token random prompt): per run the prefill's wall and process CPU time,
 * and per decode step the median wall time and the mean process CPU time. Process CPU time is
 * what a shared host distorts least (with --threads 1 it is the work done; with more threads it
 * includes the pool's spinning). Prints JSON with the medians over rounds and every round.
 *
 *   node dist/bench/compiled_generation_cpu.js --model /tmp/bench-qwen3-0.6b [--threads 1] [--rounds 3] [--new-tokens 10]
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: { model: { type: "string" }, threads: { type: "string", default: "1" }, rounds: { type: "string", default: "3" }, "new-tokens": { type: "string", default: "10" } },
});
if (!values.model) throw new Error("usage: node dist/bench/compiled_generation_cpu.js --model DIR [--threads N] [--rounds N] [--new-tokens N]");
// The pool size is read when the addon starts: set it before anything loads it.
process.env.TSORCH_NUM_THREADS = values.threads;
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { hostInfo, median } = await import("./host.js");

const PROMPT = 32, NEW = Number(values["new-tokens"]), ROUNDS = Number(values.rounds);
const model = await AutoModelForCausalLM.fromPretrained(values.model, { device: "cpu" });
const vocab = (model.config.vocab_size as number) ?? 32000;
const ids = Array.from({ length: PROMPT }, (_, i) => (i * 7919 + 11) % vocab);
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;

async function run(compile: boolean) {
  const t0 = performance.now(), c0 = process.cpuUsage();
  let prefill = 0, prefillCpu = 0, last = 0, n = 0, c1 = c0;
  const steps: number[] = [];
  for await (const _ of model.generateStream([ids], { maxNewTokens: NEW, doSample: false, eosTokenId: [], compile })) {
    const now = performance.now();
    if (n++ === 0) {
      prefill = now - t0;
      c1 = process.cpuUsage();
      prefillCpu = cpuMs(process.cpuUsage(c0));
    } else {
      steps.push(now - last);
    }
    last = now;
  }
  return { prefill_ms: prefill, prefill_cpu_ms: prefillCpu, decode_ms: median(steps), decode_cpu_ms: cpuMs(process.cpuUsage(c1)) / (n - 1) };
}

await run(true); // compiles the prompt's bucket and the decode step
await run(false);
const rounds: Record<"eager" | "compiled", Awaited<ReturnType<typeof run>>[]> = { eager: [], compiled: [] };
for (let r = 0; r < ROUNDS; r++) for (const c of r % 2 ? [true, false] : [false, true]) rounds[c ? "compiled" : "eager"].push(await run(c));
const med = (k: "eager" | "compiled", f: keyof Awaited<ReturnType<typeof run>>) => median(rounds[k].map((x) => x[f]));
const summary = Object.fromEntries((["eager", "compiled"] as const).map((k) => [k, {
  prefill_ms: med(k, "prefill_ms"), prefill_cpu_ms: med(k, "prefill_cpu_ms"), decode_ms: med(k, "decode_ms"), decode_cpu_ms: med(k, "decode_cpu_ms"),
}]));
console.log(JSON.stringify({
  host: hostInfo(), threads: Number(values.threads), prompt: PROMPT, new_tokens: NEW, ...summary,
  eager_over_compiled: {
    prefill_cpu: med("eager", "prefill_cpu_ms") / med("compiled", "prefill_cpu_ms"), decode_cpu: med("eager", "decode_cpu_ms") / med("compiled", "decode_cpu_ms"),
    prefill_wall: med("eager", "prefill_ms") / med("compiled", "prefill_ms"), decode_wall: med("eager", "decode_ms") / med("compiled", "decode_ms"),
  },
  rounds,
}, null, 2));
