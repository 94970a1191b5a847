/**
 * A bounded soak of `tsorch serve` on loopback (stories260K): 240 requests in two halves, in
 * bursts larger than the waiting queue, mixing prompt and output lengths, streaming and plain
 * requests, and clients that disconnect mid-stream. Every request must end with a complete response,
 * a 429, or (for the cancelled ones) nothing more; afterwards no sequence is left and every KV block
 * is free, and the heap after the second half is not larger than after the first.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as v8 from "node:v8";
import * as vm from "node:vm";
import { missing, STORIES } from "./helpers/shared.js";
import { load, metric, startServer, type TestServer } from "./helpers/serve.js";

const skip = missing(STORIES);

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

type Outcome = "complete" | "rejected" | "cancelled";

/** One request; `cancelAfter` chunks then the client disconnects (streaming only). */
async function request(s: TestServer, i: number): Promise<Outcome> {
  const stream = i % 3 !== 0, cancelAfter = stream && i % 5 === 1 ? 1 + (i % 4) : -1;
  const maxTokens = cancelAfter > 0 ? 400 : 4 + ((i * 7) % 40);
  const prompt = [1, ...Array.from({ length: (i * 11) % 90 }, (_, k) => 10 + ((i + k * 3) % 400))];
  const ctrl = new AbortController();
  const res = await fetch(`${s.url}/v1/completions`, {
    method: "POST", signal: ctrl.signal, headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "stories260K", prompt, max_tokens: maxTokens, temperature: i % 2 ? 0.8 : 0, seed: i, stream, ignore_eos: true, stream_options: { include_usage: true } }),
  });
  if (res.status === 429) {
    assert.equal((await res.json()).error.type, "rate_limit_exceeded");
    return "rejected";
  }
  assert.equal(res.status, 200);
  if (!stream) {
    const body = await res.json();
    assert.equal(body.usage.completion_tokens, maxTokens);
    assert.equal(body.choices[0].finish_reason, "length");
    return "complete";
  }
  let text = "", chunks = 0;
  const decoder = new TextDecoder();
  try {
    for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(part, { stream: true });
      chunks = text.split("\n\n").length - 1;
      if (cancelAfter > 0 && chunks >= cancelAfter) {
        ctrl.abort();
        return "cancelled";
      }
    }
  } catch (e) {
    if ((e as Error).name === "AbortError") return "cancelled";
    throw e;
  }
  assert.ok(text.endsWith("data: [DONE]\n\n"), `stream ${i} ended without [DONE]`);
  const usage = JSON.parse(text.split("\n\n").at(-3)!.slice(6)).usage;
  assert.equal(usage.completion_tokens, maxTokens);
  return "complete";
}

async function half(s: TestServer, from: number): Promise<Record<Outcome, number>> {
  const counts = { complete: 0, rejected: 0, cancelled: 0 };
  for (let burst = 0; burst < 4; burst++) {
    const ids = Array.from({ length: 30 }, (_, k) => from + burst * 30 + k);
    for (const o of await Promise.all(ids.map((i) => request(s, i)))) counts[o]++;
  }
  await s.engine.whenIdle();
  await new Promise((r) => setTimeout(r, 50));
  return counts;
}

test("soak: 240 mixed requests with cancellations and a full queue end cleanly, free every block, keep memory flat", { skip, timeout: 120_000 }, async () => {
  const m = await load(STORIES);
  const s = await startServer(m, { maxNumSeqs: 8, maxQueue: 12, blockSize: 8, kvCacheBytes: 4 << 20 });
  try {
    const first = await half(s, 0);
    gc();
    const heap1 = process.memoryUsage().heapUsed;
    const second = await half(s, 120);
    gc();
    const heap2 = process.memoryUsage().heapUsed;
    for (const c of [first, second]) {
      assert.ok(c.complete > 40 && c.rejected > 0 && c.cancelled > 0, `outcomes ${JSON.stringify(c)}`);
    }
    assert.equal(s.engine.numRunning + s.engine.numWaiting, 0);
    assert.equal(s.engine.pool.numUsed, 0, "KV blocks in use return to 0");
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    assert.equal(metric(metrics, "tsorch:kv_cache_usage_perc"), 0);
    assert.match(metrics, /^tsorch:request_success_total\{model_name="stories260K",finished_reason="abort"\} [1-9]/m, "cancellations were counted");
    assert.ok(heap2 < heap1 * 1.1 + (2 << 20), `heap grew from ${heap1} to ${heap2} bytes`);
  } finally {
    await s.close();
  }
});
