/**
 * `node dist/bench/quantized_decode.js --model DIR [--threads N] [--tokens N] [--rounds N]`:
 * batch-1 decode tokens/s of one checkpoint loaded as stored (e.g. bfloat16), --dtype int8 and
 * --dtype int4, measured in the same run, interleaved round by round; prints medians, the ratios to
 * the stored dtype and the host's kernel tier. Greedy, a 16-token prompt, no peer.
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { model: { type: "string" }, threads: { type: "string" }, tokens: { type: "string" }, rounds: { type: "string" } } });
if (!values.model) throw new Error("usage: node dist/bench/quantized_decode.js --model DIR [--threads N] [--tokens N] [--rounds N]");
if (values.threads) process.env.TSORCH_NUM_THREADS = values.threads;
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { native } = await import("../src/devices/cpu/native.js");
const tokens = Number(values.tokens ?? 32), rounds = Number(values.rounds ?? 3);
const prompt = Array.from({ length: 16 }, (_, i) => 100 + i);
const dtypes = ["auto", "int8", "int4"] as const;
const models = await Promise.all(dtypes.map((dtype) => AutoModelForCausalLM.fromPretrained(values.model!, { dtype })));
const rates: number[][] = dtypes.map(() => []);
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < dtypes.length; i++) {
    const m = models[i];
    const t0 = performance.now();
    await m.generate(prompt, { maxNewTokens: 1, eosTokenId: [], doSample: false });
    const t1 = performance.now();
    const out = await m.generate(prompt, { maxNewTokens: tokens + 1, eosTokenId: [], doSample: false });
    if (out.length !== prompt.length + tokens + 1) throw new Error(`generated ${out.length - prompt.length} tokens, expected ${tokens + 1}`);
    const t2 = performance.now();
    // Decode time: the longer run minus the prompt-plus-first-token run.
    rates[i].push((tokens * 1000) / (t2 - t1 - (t1 - t0)));
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(`host: ${native().cpuFeatures()}, threads ${process.env.TSORCH_NUM_THREADS ?? "all"}, ${tokens} new tokens, ${rounds} rounds`);
const base = median(rates[0]);
dtypes.forEach((d, i) => console.log(`${(d === "auto" ? models[0].dtype : d).padEnd(9)} decode ${median(rates[i]).toFixed(2)} tok/s  (${(median(rates[i]) / base).toFixed(2)}x)  runs ${rates[i].map((x) => x.toFixed(2)).join(" ")}`));
