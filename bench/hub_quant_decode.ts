/**
 * `node dist/bench/hub_quant_decode.js --model DIR [--model DIR ...] [--threads N] [--tokens N] [--rounds N]`:
 * batch-1 decode tokens/s of several checkpoints (e.g. a bfloat16 model and GPTQ / AWQ / FP8 packings
 * of it, see test/helpers/hub_quant_pack.ts), loaded as stored and measured in the same run,
 * interleaved round by round; prints medians, the ratio to the first model and the kernel tier.
 * Greedy, a 16-token prompt, no peer.
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { model: { type: "string", multiple: true }, threads: { type: "string" }, tokens: { type: "string" }, rounds: { type: "string" } } });
if (!values.model?.length) throw new Error("usage: node dist/bench/hub_quant_decode.js --model DIR [--model DIR ...] [--threads N] [--tokens N] [--rounds N]");
if (values.threads) process.env.TSORCH_NUM_THREADS = values.threads;
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { native } = await import("../src/devices/cpu/native.js");
const tokens = Number(values.tokens ?? 32), rounds = Number(values.rounds ?? 3);
const prompt = Array.from({ length: 16 }, (_, i) => 100 + i);
const dirs = values.model;
const models = await Promise.all(dirs.map((dir) => AutoModelForCausalLM.fromPretrained(dir)));
const rates: number[][] = dirs.map(() => []);
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < dirs.length; i++) {
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
dirs.forEach((d, i) => console.log(`${d}  decode ${median(rates[i]).toFixed(2)} tok/s  (${(median(rates[i]) / base).toFixed(2)}x)  runs ${rates[i].map((x) => x.toFixed(2)).join(" ")}`));
