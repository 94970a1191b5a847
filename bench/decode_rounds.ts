/**
 * Batch-1 decode tokens/s of several loaded models measured in the same run, interleaved round by
 * round (greedy, a 16-token prompt): each round times a prompt-plus-first-token run and a run of
 * `tokens` more, and counts the difference as decode. Prints the host's kernel tier, and per model
 * the median, its ratio to the first model and every round. Used by quantized_decode.ts and
 * hub_quant_decode.ts.
 */
import { native } from "../src/devices/cpu/native.js";

interface DecodeModel {
  generate(prompt: number[], opts: { maxNewTokens: number; eosTokenId: number[]; doSample: boolean }): Promise<number[]>;
}

export async function printDecodeRounds(labels: string[], models: DecodeModel[], tokens: number, rounds: number): Promise<void> {
  const prompt = Array.from({ length: 16 }, (_, i) => 100 + i);
  const rates: number[][] = models.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (const [i, m] of models.entries()) {
      const t0 = performance.now();
      await m.generate(prompt, { maxNewTokens: 1, eosTokenId: [], doSample: false });
      const t1 = performance.now();
      const out = await m.generate(prompt, { maxNewTokens: tokens + 1, eosTokenId: [], doSample: false });
      if (out.length !== prompt.length + tokens + 1) throw new Error(`generated ${out.length - prompt.length} tokens, expected ${tokens + 1}`);
      const t2 = performance.now();
      rates[i].push((tokens * 1000) / (t2 - t1 - (t1 - t0)));
    }
  }
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  console.log(`host: ${native().cpuFeatures()}, threads ${process.env.TSORCH_NUM_THREADS ?? "all"}, ${tokens} new tokens, ${rounds} rounds`);
  const base = median(rates[0]);
  labels.forEach((l, i) => console.log(`${l.padEnd(9)} decode ${median(rates[i]).toFixed(2)} tok/s  (${(median(rates[i]) / base).toFixed(2)}x)  runs ${rates[i].map((x) => x.toFixed(2)).join(" ")}`));
}
