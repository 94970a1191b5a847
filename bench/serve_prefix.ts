/**
 * Prefix-cache measurement against a running `tsorch serve`:
 *   node dist/bench/serve_prefix.js --url URL --model NAME [--prefix-len 512] [--suffix-len 16]
 * Sends a streaming request whose prompt is a random prefix plus a suffix, then a second one with
 * the same prefix and another suffix, and prints both times to first token, their ratio, and how
 * much the server's prefix-cache hit counter rose (JSON).
 */
import { parseArgs } from "node:util";
import { randomPrompt } from "../src/serve/bench.js";

const { values } = parseArgs({ options: { url: { type: "string" }, model: { type: "string" }, "prefix-len": { type: "string", default: "512" }, "suffix-len": { type: "string", default: "16" } } });
if (!values.url || !values.model) throw new Error("--url and --model are required");
const url = values.url.replace(/\/$/, "");
const prefix = randomPrompt(Number(values["prefix-len"]), Date.now() % 100000);
const suffix = (seed: number) => randomPrompt(Number(values["suffix-len"]), seed);

async function hits(): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("tsorch:prefix_cache_hits_total"));
  return Number(line?.split(" ").at(-1) ?? 0);
}

async function ttft(prompt: number[]): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: values.model, prompt, max_tokens: 4, temperature: 0, ignore_eos: true, stream: true }),
  });
  const reader = res.body!.getReader();
  await reader.read();
  const t = performance.now() - t0;
  while (!(await reader.read()).done);
  return t;
}

const h0 = await hits();
const first = await ttft([...prefix, ...suffix(1)]);
const h1 = await hits();
const second = await ttft([...prefix, ...suffix(2)]);
const h2 = await hits();
process.stdout.write(JSON.stringify({ prefixLen: prefix.length, firstTtftMs: first, secondTtftMs: second, ratio: second / first, hitsFirst: h1 - h0, hitsSecond: h2 - h1 }) + "\n");
