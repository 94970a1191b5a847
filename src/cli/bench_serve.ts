/**
 * `tsorch bench serve`: benchmark a running server (serve/bench.ts). --concurrency takes a list
 * (e.g. 32,1): each level runs in turn, in the same run, with prompts of the same lengths but other
 * random tokens (so one level cannot hit the prefix cache that the previous one filled), and the
 * output tokens/s of every level is also given as a ratio to the first level's.
 */
import { benchServe, type BenchResult } from "../serve/bench.js";
import { numberFlag, parseFlags, UsageError } from "./args.js";

export const BENCH_USAGE = `usage: tsorch bench serve --url URL --model NAME [options]
  --num-prompts 32         requests per concurrency level
  --concurrency 32         requests in flight at most; a list (32,1) runs each level in turn (fresh random prompts)
  --request-rate inf       Poisson arrivals per second
  --input-len 128          prompt tokens (random ids)   --output-len 128   new tokens (ignore_eos)
  --api-key KEY            (or env TSORCH_API_KEY)      --seed 0
  --output text|json`;

function line(r: BenchResult, base: BenchResult): string {
  const f = (x: number) => x.toFixed(1);
  return [
    `concurrency ${r.concurrency}: ${r.completed} ok, ${r.failed} failed in ${r.durationS.toFixed(2)} s`,
    `  request throughput ${r.requestThroughput.toFixed(3)} req/s, output ${f(r.outputThroughput)} tok/s (${(r.outputThroughput / base.outputThroughput).toFixed(2)}x level ${base.concurrency})`,
    `  TTFT ms mean ${f(r.ttftMs.mean)} median ${f(r.ttftMs.median)} p99 ${f(r.ttftMs.p99)}`,
    `  TPOT ms mean ${f(r.tpotMs.mean)} median ${f(r.tpotMs.median)} p99 ${f(r.tpotMs.p99)}`,
    `  ITL  ms mean ${f(r.itlMs.mean)} median ${f(r.itlMs.median)} p99 ${f(r.itlMs.p99)}`,
  ].join("\n");
}

export async function benchCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== "serve") throw new UsageError(`tsorch bench: unknown benchmark '${sub ?? ""}'\n${BENCH_USAGE}`);
  const v = parseFlags(rest, {
    url: { type: "string" }, model: { type: "string" }, "num-prompts": { type: "string" }, concurrency: { type: "string" },
    "request-rate": { type: "string" }, "input-len": { type: "string" }, "output-len": { type: "string" },
    "api-key": { type: "string" }, seed: { type: "string" }, output: { type: "string" },
  });
  if (typeof v.url !== "string" || typeof v.model !== "string") throw new UsageError("--url and --model are required");
  const levels = ((v.concurrency as string | undefined) ?? "32").split(",").map((s) => Number(s.trim()));
  if (levels.some((c) => !Number.isInteger(c) || c < 1)) throw new UsageError(`--concurrency expects positive integers (e.g. 32 or 32,1), got '${v.concurrency}'`);
  const rate = v["request-rate"] === undefined || v["request-rate"] === "inf" ? Infinity : numberFlag(v, "request-rate")!;
  if (!(rate > 0)) throw new UsageError(`--request-rate must be positive or inf, got '${v["request-rate"]}'`);
  const results: BenchResult[] = [];
  for (const [level, concurrency] of levels.entries()) {
    results.push(await benchServe({
      url: v.url, model: v.model, concurrency, requestRate: rate,
      numPrompts: numberFlag(v, "num-prompts", true) ?? 32,
      inputLen: numberFlag(v, "input-len", true) ?? 128,
      outputLen: numberFlag(v, "output-len", true) ?? 128,
      apiKey: (v["api-key"] as string | undefined) ?? process.env.TSORCH_API_KEY,
      seed: (numberFlag(v, "seed", true) ?? 0) + 1000 * level,
    }));
  }
  if (v.output === "json") process.stdout.write(JSON.stringify(results) + "\n");
  else process.stdout.write(results.map((r) => line(r, results[0])).join("\n") + "\n");
}
