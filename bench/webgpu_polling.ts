/**
 * Eager and compiled greedy decoding on webgpu with Dawn's read polling as it is (spin -1) and
 * yielding after a few spins (src/devices/webgpu/polling.ts), interleaved in one process (batch 1,
 * the bench's 32-token prompt). Per configuration: the median wall ms per decode step over rounds,
 * and the host (main) thread's CPU ms per step from /proc (Linux), which a shared host distorts
 * least: the spinning it removes is CPU that lavapipe's worker threads need. Prints one line each.
 *
 *   node dist/bench/webgpu_polling.js [--model DIR] [--rounds 5] [--new-tokens 100] [--spins=-1,0.25]
 */
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { median } from "./host.js";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: "../shared/models/stories260K" }, rounds: { type: "string", default: "5" },
    "new-tokens": { type: "string", default: "100" }, spins: { type: "string", default: "-1,0.25" },
  },
});
const ROUNDS = Number(values.rounds), NEW = Number(values["new-tokens"]), SPINS = values.spins.split(",");
const model = await AutoModelForCausalLM.fromPretrained(values.model, { device: "webgpu" });
const vocab = (model.config.vocab_size as number) ?? 32000;
const ids = Array.from({ length: 32 }, (_, i) => (i * 7919 + 11) % vocab);

/** CPU ms of this process's main thread (utime + stime, in 10 ms clock ticks). */
function mainThreadMs(): number {
  const f = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** Wall ms per decode step (after the first token) of one generation. */
async function run(compile: boolean): Promise<number> {
  let t0 = 0, n = 0;
  for await (const _ of model.generateStream([ids], { maxNewTokens: NEW, doSample: false, eosTokenId: [], compile })) if (n++ === 0) t0 = performance.now();
  return (performance.now() - t0) / (n - 1);
}

await run(true); // compiles the prompt's bucket and the decode step
await run(false);
const rows = new Map<string, { wall: number[]; main: number[] }>();
for (let r = 0; r < ROUNDS; r++) for (const spin of SPINS) for (const compile of [false, true]) {
  process.env.TSORCH_WEBGPU_SPIN_MS = spin;
  const key = `${compile ? "compiled" : "eager"} spin=${spin}`;
  if (!rows.has(key)) rows.set(key, { wall: [], main: [] });
  const m0 = mainThreadMs(), wall = await run(compile);
  rows.get(key)!.wall.push(wall);
  rows.get(key)!.main.push((mainThreadMs() - m0) / NEW);
}
for (const [key, { wall, main }] of rows) {
  console.log(`${key.padEnd(22)} wall ms/step ${median(wall).toFixed(2)} (${wall.map((x) => x.toFixed(2)).join(" ")})  main-thread cpu ms/step ${median(main).toFixed(2)}`);
}
console.log(`load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
process.exit(0);
