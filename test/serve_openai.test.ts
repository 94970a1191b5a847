/**
 * `tsorch serve` through the official `openai` client on stories260K: greedy completions equal
 * `tsorch generate` (and transformers' greedy ids in expected.json), streaming yields the same text,
 * chat completions apply the tokenizer's chat template, 32 concurrent streams of different lengths
 * each equal their own sequential greedy ids while the engine really batches them, the prefix cache
 * is hit by a shared prompt, and the errors (401, 404, 400, 413, 429, 503) use OpenAI's shape.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { symlinkSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import OpenAI from "openai";
import { CLI, missing, readJson, STORIES } from "./helpers/shared.js";
import { load, metric, startServer, type TestServer } from "./helpers/serve.js";
import { tempDir } from "./helpers/temp_dir.js";

const skip = missing(STORIES);
type Loaded = Awaited<ReturnType<typeof load>>;
let m: Loaded;
let server: TestServer;
let client: OpenAI;

before(async () => {
  if (skip) return;
  m = await load(STORIES);
  server = await startServer(m);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});
after(async () => { await server?.close(); });

/** Extra (vLLM) fields the openai types do not know. */
const extra = <T extends object>(body: T, more: object): T => ({ ...body, ...more });
/** Token ids from logprobs tokens sent as "token_id:ID". */
const idsOf = (tokens: string[]) => tokens.map((t) => Number(t.slice("token_id:".length)));

test("a temperature-0 completion equals `tsorch generate`'s greedy text and transformers' ids", { skip }, async () => {
  const prompt = "Once upon a time";
  const { stdout } = await promisify(execFile)(process.execPath, [CLI, "generate", "--model", STORIES, "--prompt", prompt, "--max-new-tokens", "64", "--do-sample", "false"]);
  const r = await client.completions.create(extra({ model: "stories260K", prompt, max_tokens: 64, temperature: 0, logprobs: 0 }, { return_tokens_as_token_ids: true }));
  assert.equal(prompt + r.choices[0].text + "\n", stdout);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.deepEqual(r.usage, { prompt_tokens: 5, completion_tokens: 64, total_tokens: 69 });
  // transformers' greedy continuation of BOS starts with "Once upon a time" (ids 403 407 261 378).
  const e = readJson(path.join(STORIES, "expected.json"));
  assert.deepEqual(idsOf(r.choices[0].logprobs!.tokens!), e.greedy_from_bos.new_ids.slice(4, 68));
});

test("streaming yields the same text chunk by chunk, then usage and finish_reason", { skip }, async () => {
  const body = { model: "stories260K", prompt: "Once upon a time", max_tokens: 64, temperature: 0 };
  const whole = await client.completions.create(body);
  const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  const pieces: string[] = [];
  let finish: string | null = null, usage: OpenAI.CompletionUsage | null | undefined;
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      pieces.push(chunk.choices[0].text);
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(pieces.length > 10, `expected many chunks, got ${pieces.length}`);
  assert.equal(pieces.join(""), whole.choices[0].text);
  assert.equal(finish, "length");
  assert.equal(usage?.completion_tokens, 64);
});

test("chat completions render the tokenizer's chat template (plain and streamed)", { skip }, async () => {
  // stories260K with a chat template: a folder of links to its files plus a tokenizer_config.json.
  const dir = tempDir("tsorch-serve-chat-");
  for (const f of ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json"]) symlinkSync(path.join(STORIES, f), path.join(dir, f));
  const template = "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";
  writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify({ bos_token: "<s>", eos_token: "</s>", chat_template: template }));
  const chat = await load(dir);
  const s = await startServer(chat, { servedModelName: "chat" });
  try {
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "system" as const, content: "Tell a story." }, { role: "user" as const, content: "Once upon a time" }];
    const prompt = chat.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }) as number[];
    const out = (await chat.model.generate(prompt, { maxNewTokens: 40, doSample: false })).slice(prompt.length);
    const expected = chat.tokenizer.decode([...prompt, ...out], { skipSpecialTokens: true }).slice(chat.tokenizer.decode(prompt, { skipSpecialTokens: true }).length);
    const r = await c.chat.completions.create({ model: "chat", messages, max_completion_tokens: 40, temperature: 0 });
    assert.equal(r.object, "chat.completion");
    assert.equal(r.choices[0].message.role, "assistant");
    assert.equal(r.choices[0].message.content, expected);
    assert.equal(r.usage?.prompt_tokens, prompt.length);
    let streamed = "";
    for await (const chunk of await c.chat.completions.create({ model: "chat", messages, max_tokens: 40, temperature: 0, stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
    }
    assert.equal(streamed, expected);
  } finally {
    await s.close();
  }
});

test("32 concurrent streams of different lengths each equal their sequential greedy ids, batched", { skip }, async () => {
  const story: number[] = readJson(path.join(STORIES, "expected.json")).greedy_from_bos.new_ids;
  const jobs = Array.from({ length: 32 }, (_, i) => ({ prompt: [1, ...story.slice(i % 7, (i % 7) + 1 + ((i * 5) % 40))], max: 8 + ((i * 13) % 57) }));
  const want = await Promise.all(jobs.map(async (j) => (await m.model.generate(j.prompt, { maxNewTokens: j.max, doSample: false, eosTokenId: [] })).slice(j.prompt.length)));
  const before = await (await fetch(`${server.url}/metrics`)).text();
  const runs = jobs.map(async (j) => {
    const ids: number[] = [];
    const stream = await client.completions.create(extra({ model: "stories260K", prompt: j.prompt, max_tokens: j.max, temperature: 0, stream: true as const, logprobs: 0 }, { return_tokens_as_token_ids: true, ignore_eos: true }));
    for await (const chunk of stream) ids.push(...idsOf(chunk.choices[0]?.logprobs?.tokens ?? []));
    return ids;
  });
  const got = await Promise.all(runs);
  got.forEach((ids, i) => assert.deepEqual(ids, want[i], `request ${i}`));
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const single = (t: string) => metric(t, 'tsorch:iteration_num_running_bucket{le="1"');
  const steps = (t: string) => metric(t, "tsorch:iteration_num_running_count");
  assert.ok(steps(text) - steps(before) > single(text) - single(before), "some engine step ran more than one sequence");
  assert.ok(metric(text, "tsorch:iteration_num_running_sum") - metric(before, "tsorch:iteration_num_running_sum") > steps(text) - steps(before), "mean batch size above 1");
  assert.equal(server.engine.pool.numUsed, 0, "every KV block is free again");
});

test("a shared prompt prefix hits the prefix cache and gives the same text", { skip }, async () => {
  const story: number[] = readJson(path.join(STORIES, "expected.json")).greedy_from_bos.new_ids;
  const prefix = [1, ...story.slice(0, 160)];
  const hits = async () => metric(await (await fetch(`${server.url}/metrics`)).text(), "tsorch:prefix_cache_hits_total");
  const h0 = await hits();
  const a = await client.completions.create({ model: "stories260K", prompt: [...prefix, 432], max_tokens: 8, temperature: 0 });
  const h1 = await hits();
  const b = await client.completions.create({ model: "stories260K", prompt: [...prefix, 432], max_tokens: 8, temperature: 0 });
  const h2 = await hits();
  assert.equal(b.choices[0].text, a.choices[0].text);
  assert.equal(h2 - h1, 160, "the second request found the 10 full blocks of its prompt in the cache");
  assert.ok(h1 - h0 < 160);
});

test("sampling fields, n, seed and stop strings", { skip }, async () => {
  const body = { model: "stories260K", prompt: "Once upon a time", max_tokens: 30, temperature: 0.9, top_p: 0.9, seed: 7, n: 3 };
  const a = await client.completions.create(extra(body, { top_k: 20, min_p: 0.01, repetition_penalty: 1.1 }));
  const b = await client.completions.create(extra(body, { top_k: 20, min_p: 0.01, repetition_penalty: 1.1 }));
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text), "the same seed gives the same samples");
  const stopped = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 64, temperature: 0, stop: ["Lily"] });
  assert.equal(stopped.choices[0].text, ", there was a little girl named ");
  assert.equal(stopped.choices[0].finish_reason, "stop");
  const chat = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 64, temperature: 0, presence_penalty: 1.5, frequency_penalty: 0.5 });
  assert.notEqual(chat.choices[0].text, stopped.choices[0].text);
});

test("errors use OpenAI's shape: 400 malformed, 404 unknown model, 413 too large, 401 without the key", { skip }, async () => {
  const post = (url: string, body: string, headers: Record<string, string> = {}) => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  const shape = (r: { error: Record<string, unknown> }, status: number) => {
    assert.deepEqual(Object.keys(r.error).sort(), ["code", "message", "param", "type"]);
    assert.equal(r.error.code, status);
  };
  let r = await post(`${server.url}/v1/completions`, JSON.stringify({ model: "stories260K", prompt: "x", temperature: "hot" }));
  assert.equal(r.status, 400);
  const bad = await r.json();
  shape(bad, 400);
  assert.equal(bad.error.message, "invalid request body: temperature must be number or null", "anyOf branches merged into one clause");
  assert.equal(bad.error.param, "temperature");
  r = await post(`${server.url}/v1/completions`, JSON.stringify({ model: "stories260K", prompt: [1], stop: 3, max_tokens: 0 }));
  assert.equal((await r.json()).error.message, "invalid request body: max_tokens must be >= 1");
  r = await post(`${server.url}/v1/chat/completions`, JSON.stringify({ model: "stories260K", messages: [{ role: "user", content: 3 }] }));
  assert.equal((await r.json()).error.message, "invalid request body: messages.0.content must be string, array or null");
  r = await post(`${server.url}/v1/completions`, "{not json");
  assert.equal(r.status, 400);
  shape(await r.json(), 400);
  await assert.rejects(client.completions.create({ model: "stories260K", prompt: "x", max_tokens: 600 }), (e: InstanceType<typeof OpenAI.APIError>) => e.status === 400 && /maximum context length is 512/.test(e.message));
  await assert.rejects(client.completions.create({ model: "gpt-4", prompt: "x" }), (e: InstanceType<typeof OpenAI.APIError>) => e.status === 404 && /model `gpt-4` does not exist/.test(e.message));
  r = await post(`${server.url}/v1/completions`, JSON.stringify({ model: "stories260K", prompt: "x".repeat(2 << 20) }));
  assert.equal(r.status, 413);
  shape(await r.json(), 413);

  const locked = await startServer(m, { apiKey: "sekret" });
  try {
    r = await post(`${locked.url}/v1/completions`, JSON.stringify({ model: "stories260K", prompt: "x", max_tokens: 2 }));
    assert.equal(r.status, 401);
    shape(await r.json(), 401);
    r = await post(`${locked.url}/v1/completions`, JSON.stringify({ model: "stories260K", prompt: "x", max_tokens: 2 }), { authorization: "Bearer sekreT" });
    assert.equal(r.status, 401);
    const ok = await new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: "sekret", maxRetries: 0 }).completions.create({ model: "stories260K", prompt: "x", max_tokens: 2 });
    assert.equal(ok.usage?.completion_tokens, 2);
    assert.equal((await fetch(`${locked.url}/health`)).status, 200, "/health needs no key");
  } finally {
    await locked.close();
  }
});

test("a full waiting queue answers 429 with Retry-After; draining answers 503", { skip }, async () => {
  const s = await startServer(m, { maxNumSeqs: 1, maxQueue: 1 });
  try {
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const long = { model: "stories260K", prompt: [1], max_tokens: 500, temperature: 0, stream: true as const };
    const first = await c.completions.create(extra(long, { ignore_eos: true }));
    const it = first[Symbol.asyncIterator]();
    await it.next(); // running
    const second = c.completions.create({ model: "stories260K", prompt: [1], max_tokens: 4 });
    while (s.engine.numWaiting < 1) await new Promise((r) => setTimeout(r, 1));
    const r = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "stories260K", prompt: "x" }) });
    assert.equal(r.status, 429);
    assert.equal(r.headers.get("retry-after"), "1");
    assert.equal((await r.json()).error.type, "rate_limit_exceeded");
    const drained = s.drain(30_000);
    assert.equal((await fetch(`${s.url}/health`)).status, 503);
    const refused = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "stories260K", prompt: "x" }) });
    assert.equal(refused.status, 503);
    let n = 1;
    while (!(await it.next()).done) n++;
    assert.ok(n > 100, "the running stream finished during the drain");
    assert.equal((await second).usage?.completion_tokens, 4, "the waiting request finished too");
    await drained;
  } finally {
    await s.close();
  }
});
