/**
 * The serving benchmark (vLLM's benchmark_serving, random dataset): `numPrompts` streaming
 * completion requests of `inputLen` random token ids and exactly `outputLen` new tokens
 * (ignore_eos), at most `concurrency` in flight, arriving as a Poisson process of `requestRate`
 * per second (Infinity = all at once). Reports request throughput, output tokens/s, and mean /
 * median / p99 of TTFT (time to first token), TPOT (time per output token after the first) and
 * ITL (time between streamed chunks), in milliseconds.
 */

export interface BenchOptions {
  /** Server root, e.g. http://127.0.0.1:8000 (the /v1 prefix is added). */
  url: string;
  model: string;
  numPrompts: number;
  concurrency: number;
  requestRate: number;
  inputLen: number;
  outputLen: number;
  apiKey?: string;
  /** Seed of the random prompts (the same seed gives the same prompts). */
  seed?: number;
}

export interface Stats { mean: number; median: number; p99: number }

export interface BenchResult {
  concurrency: number;
  completed: number;
  failed: number;
  durationS: number;
  requestThroughput: number;
  outputThroughput: number;
  totalInputTokens: number;
  totalOutputTokens: number;
  ttftMs: Stats;
  tpotMs: Stats;
  itlMs: Stats;
}

interface RequestResult { ok: boolean; ttft: number; latency: number; outputTokens: number; itl: number[]; error?: string }

/** Token ids in [10, 500): valid for any vocabulary of at least 512 tokens. */
export function randomPrompt(len: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: len }, () => 10 + ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) % 490));
}

function stats(xs: number[]): Stats {
  if (xs.length === 0) return { mean: 0, median: 0, p99: 0 };
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => {
    const i = q * (s.length - 1), lo = Math.floor(i), hi = Math.ceil(i);
    return s[lo] + (s[hi] - s[lo]) * (i - lo);
  };
  return { mean: s.reduce((a, b) => a + b, 0) / s.length, median: at(0.5), p99: at(0.99) };
}

/** One streaming request; times are in ms. */
async function oneRequest(o: BenchOptions, prompt: number[]): Promise<RequestResult> {
  const t0 = performance.now();
  const res = await fetch(`${o.url.replace(/\/$/, "")}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}) },
    body: JSON.stringify({ model: o.model, prompt, max_tokens: o.outputLen, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
  });
  if (!res.ok || !res.body) return { ok: false, ttft: 0, latency: 0, outputTokens: 0, itl: [], error: `HTTP ${res.status}: ${await res.text()}` };
  let ttft = 0, last = t0, outputTokens = 0, buffer = "";
  const itl: number[] = [];
  const decoder = new TextDecoder();
  for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(part, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end).replace(/^data: /, "");
      buffer = buffer.slice(end + 2);
      if (event === "[DONE]") continue;
      const data = JSON.parse(event) as { choices: { text: string }[]; usage?: { completion_tokens: number } | null };
      const now = performance.now();
      if (data.usage) outputTokens = data.usage.completion_tokens;
      if (!data.choices.length) continue;
      if (ttft === 0) ttft = now - t0;
      else itl.push(now - last);
      last = now;
    }
  }
  return { ok: true, ttft, latency: performance.now() - t0, outputTokens, itl };
}

/** Run the benchmark once at `o.concurrency`. */
export async function benchServe(o: BenchOptions): Promise<BenchResult> {
  const prompts = Array.from({ length: o.numPrompts }, (_, i) => randomPrompt(o.inputLen, (o.seed ?? 0) * 7919 + i + 1));
  const results: RequestResult[] = [];
  let next = 0;
  const t0 = performance.now();
  let arrival = 0;
  const arrivals = prompts.map(() => (arrival += Number.isFinite(o.requestRate) ? -Math.log(1 - Math.random()) / o.requestRate * 1000 : 0));
  const worker = async () => {
    while (next < prompts.length) {
      const i = next++;
      const wait = t0 + arrivals[i] - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      try {
        results.push(await oneRequest(o, prompts[i]));
      } catch (e) {
        results.push({ ok: false, ttft: 0, latency: 0, outputTokens: 0, itl: [], error: (e as Error).message });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, prompts.length) }, worker));
  const durationS = (performance.now() - t0) / 1000;
  const ok = results.filter((r) => r.ok);
  const out = ok.reduce((a, r) => a + r.outputTokens, 0);
  const failed = results.filter((r) => !r.ok);
  if (failed.length) process.stderr.write(`bench serve: ${failed.length} request(s) failed, e.g. ${failed[0].error}\n`);
  return {
    concurrency: o.concurrency,
    completed: ok.length,
    failed: failed.length,
    durationS,
    requestThroughput: ok.length / durationS,
    outputThroughput: out / durationS,
    totalInputTokens: ok.length * o.inputLen,
    totalOutputTokens: out,
    ttftMs: stats(ok.map((r) => r.ttft)),
    tpotMs: stats(ok.filter((r) => r.outputTokens > 1).map((r) => (r.latency - r.ttft) / (r.outputTokens - 1))),
    itlMs: stats(ok.flatMap((r) => r.itl)),
  };
}
