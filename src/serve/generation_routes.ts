/**
 * POST /v1/completions and /v1/chat/completions: turn a validated request into engine sequences
 * (one per prompt and choice), then answer with one JSON body or, with `stream`, Server-Sent Events
 * (a chunk per piece of text, a usage chunk with stream_options.include_usage, then [DONE]), in
 * OpenAI's response shapes. A client that disconnects cancels its sequences at the next step.
 */
import { randomUUID } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { PreTrainedTokenizer } from "../transformers/tokenization.js";
import type { Engine } from "./engine.js";
import { ApiError, badRequest, type ChatRequest, type CompletionRequest, type SamplingFields } from "./protocol.js";
import type { Sequence, SamplingParams, TokenEvent } from "./sequence.js";
import { TextOutput } from "./text_output.js";

export interface RouteContext {
  engine: Engine;
  /** null: the checkpoint has no tokenizer; prompts are token ids and texts stay empty. */
  tokenizer: PreTrainedTokenizer | null;
  servedModelName: string;
  /** EOS ids of the model (generation_config.json, config.json, tokenizer). */
  eosIds: number[];
}

interface TokenLogprob {
  token: number;
  logprob: number;
  top: { token: number; logprob: number }[];
}

/** One choice in flight: its sequence, text so far and logprobs not yet sent. */
interface Choice {
  index: number;
  promptIndex: number;
  seq?: Sequence;
  out: TextOutput;
  tokens: number[];
  logprobs: TokenLogprob[];
  unsent: TokenLogprob[];
  finish?: string;
}

type Piece = (c: Choice, text: string, finish: string | undefined) => void;

function samplingParams(ctx: RouteContext, b: SamplingFields, maxTokens: number): SamplingParams {
  const stop = b.stop == null ? [] : typeof b.stop === "string" ? [b.stop] : b.stop;
  return {
    maxTokens,
    temperature: b.temperature ?? 1,
    topP: b.top_p ?? 1,
    topK: Math.max(0, b.top_k ?? 0),
    minP: b.min_p ?? 0,
    presencePenalty: b.presence_penalty ?? 0,
    frequencyPenalty: b.frequency_penalty ?? 0,
    repetitionPenalty: b.repetition_penalty ?? 1,
    seed: b.seed ?? undefined,
    stop,
    stopTokenIds: ctx.eosIds,
    ignoreEos: b.ignore_eos ?? false,
  };
}

/** The tokenizer, or a 400 naming what needs it. */
export function needTokenizer(ctx: RouteContext, what: string): PreTrainedTokenizer {
  if (!ctx.tokenizer) throw badRequest(`${what} needs a tokenizer, and the served checkpoint has none (no tokenizer.json): send the prompt as token ids`);
  return ctx.tokenizer;
}

function checkModel(ctx: RouteContext, model: string): void {
  if (model !== ctx.servedModelName) throw new ApiError(404, `The model \`${model}\` does not exist.`, "not_found_error", "model");
}

/** max_tokens checked against the context left after the longest prompt (vLLM's message). */
function resolveMaxTokens(ctx: RouteContext, prompts: number[][], requested: number | null | undefined, fallback: number): number {
  const longest = Math.max(...prompts.map((p) => p.length)), max = ctx.engine.maxModelLen;
  for (const p of prompts) {
    try {
      ctx.engine.checkPrompt(p);
    } catch (e) {
      throw badRequest((e as Error).message, "prompt");
    }
  }
  if (requested != null && longest + requested > max) {
    throw badRequest(`This model's maximum context length is ${max} tokens. However, you requested ${longest + requested} tokens (${longest} in the prompt, ${requested} in the completion). Please reduce the length of the prompt or completion.`, "max_tokens");
  }
  return Math.min(requested ?? fallback, max - longest);
}

/**
 * Start every choice; `piece` receives text as it comes. Resolves when all finished. Throws
 * ApiError 429 (with Retry-After) when the waiting queue cannot take them all.
 */
function start(ctx: RouteContext, prompts: number[][], n: number, params: SamplingParams, piece: Piece): { choices: Choice[]; done: Promise<void>; abort: () => void } {
  const total = prompts.length * n;
  if (!ctx.engine.canAccept(total)) {
    throw new ApiError(429, `The server is busy: its waiting queue is full (${ctx.engine.o.maxQueue} sequences). Retry later.`, "rate_limit_exceeded", null, { "retry-after": "1" });
  }
  const choices: Choice[] = [];
  const finished: Promise<void>[] = [];
  prompts.forEach((prompt, pi) => {
    for (let j = 0; j < n; j++) {
      const c: Choice = { index: pi * n + j, promptIndex: pi, out: new TextOutput(ctx.tokenizer, prompt, params.stop), tokens: [], logprobs: [], unsent: [] };
      choices.push(c);
      const p = params.seed === undefined || j === 0 ? params : { ...params, seed: params.seed + j };
      finished.push(new Promise<void>((resolve) => {
        c.seq = ctx.engine.add(prompt, p, (e: TokenEvent) => {
          if (e.finish === "abort") {
            c.finish = "abort";
            resolve();
            return;
          }
          c.tokens.push(e.token);
          if (e.logprob !== undefined) {
            const lp = { token: e.token, logprob: e.logprob, top: e.top ?? [] };
            c.logprobs.push(lp);
            c.unsent.push(lp);
          }
          const r = c.out.push(e.token);
          const finish = r.stopped ? "stop" : e.finish;
          piece(c, finish && !r.stopped ? r.text + c.out.flush() : r.text, finish);
          if (finish) {
            c.finish = finish;
            resolve();
          }
          return r.stopped ? "stop" : undefined;
        });
      }));
    }
  });
  return { choices, done: Promise.all(finished).then(() => undefined), abort: () => choices.forEach((c) => c.seq && ctx.engine.abort(c.seq)) };
}

function usageOf(prompts: number[][], choices: Choice[]) {
  const prompt = prompts.reduce((a, p) => a + p.length, 0), completion = choices.reduce((a, c) => a + c.tokens.length, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** Run the choices and reply: JSON, or an SSE stream. `format` builds a choice's object from its text piece. */
async function respond(ctx: RouteContext, req: FastifyRequest, reply: FastifyReply, body: SamplingFields, prompts: number[][], params: SamplingParams, kind: "text_completion" | "chat.completion", format: {
  chunk(c: Choice, text: string, finish: string | undefined, first: boolean): object;
  full(c: Choice): object;
}): Promise<void> {
  const id = `${kind === "chat.completion" ? "chatcmpl" : "cmpl"}-${randomUUID().replace(/-/g, "")}`;
  const created = Math.floor(Date.now() / 1000), model = ctx.servedModelName;
  const n = body.n ?? 1;
  const res = reply.raw;
  if (!body.stream) {
    const run = start(ctx, prompts, n, params, () => {});
    res.on("close", () => { if (!res.writableFinished) run.abort(); });
    await run.done;
    if (run.choices.some((c) => c.finish === "abort")) {
      if (res.destroyed) return;
      throw new ApiError(500, "generation was aborted (the engine failed or the server is stopping)", "server_error");
    }
    reply.send({ id, object: kind, created, model, choices: run.choices.map((c) => format.full(c)), usage: usageOf(prompts, run.choices) });
    return;
  }
  const object = kind === "chat.completion" ? "chat.completion.chunk" : "text_completion";
  const includeUsage = body.stream_options?.include_usage === true;
  const send = (data: object) => res.write(`data: ${JSON.stringify(data)}\n\n`);
  const started = new Set<Choice>();
  let opened = false;
  const open = () => {
    if (opened) return;
    opened = true;
    reply.hijack();
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  };
  const run = start(ctx, prompts, n, params, (c, text, finish) => {
    if (res.destroyed || (text === "" && !finish && !c.unsent.length && ctx.tokenizer)) return;
    open();
    const first = !started.has(c);
    started.add(c);
    send({ id, object, created, model, choices: [format.chunk(c, text, finish, first)], ...(includeUsage ? { usage: null } : {}) });
    c.unsent = [];
  });
  open();
  req.raw.socket.setNoDelay(true);
  res.on("close", () => { if (!res.writableFinished) run.abort(); });
  await run.done;
  if (res.destroyed) return;
  if (includeUsage) send({ id, object, created, model, choices: [], usage: usageOf(prompts, run.choices) });
  res.end("data: [DONE]\n\n");
}

// ------------------------------------------------------------------ completions

export async function completions(ctx: RouteContext, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const b = req.body as CompletionRequest;
  checkModel(ctx, b.model);
  if (b.echo) throw badRequest("echo is not supported", "echo");
  const raw = b.prompt;
  const prompts: number[][] = typeof raw === "string" ? [needTokenizer(ctx, "a text prompt").encode(raw)]
    : typeof raw[0] === "number" ? [raw as number[]]
    : typeof raw[0] === "string" ? (raw as string[]).map((p) => needTokenizer(ctx, "a text prompt").encode(p))
    : (raw as number[][]);
  if (b.stop) needTokenizer(ctx, "stop");
  const params = samplingParams(ctx, b, resolveMaxTokens(ctx, prompts, b.max_tokens, 16));
  if (b.logprobs != null) params.logprobs = b.logprobs;
  const tokenText = (t: number) => (b.return_tokens_as_token_ids || !ctx.tokenizer ? `token_id:${t}` : ctx.tokenizer.decode([t]));
  const logprobs = (lps: TokenLogprob[], offset: number) => {
    if (b.logprobs == null) return null;
    const offsets: number[] = [];
    let at = offset;
    for (const lp of lps) { offsets.push(at); at += tokenText(lp.token).length; }
    return {
      tokens: lps.map((lp) => tokenText(lp.token)),
      token_logprobs: lps.map((lp) => lp.logprob),
      top_logprobs: lps.map((lp) => Object.fromEntries(lp.top.map((t) => [tokenText(t.token), t.logprob]))),
      text_offset: offsets,
    };
  };
  await respond(ctx, req, reply, b, prompts, params, "text_completion", {
    chunk: (c, text, finish) => ({ index: c.index, text, logprobs: logprobs(c.unsent, c.out.text.length - text.length), finish_reason: finish ?? null }),
    full: (c) => ({ index: c.index, text: c.out.text, logprobs: logprobs(c.logprobs, 0), finish_reason: c.finish }),
  });
}

// ------------------------------------------------------------------ chat completions

export async function chatCompletions(ctx: RouteContext, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const b = req.body as ChatRequest;
  checkModel(ctx, b.model);
  const messages = b.messages.map((m) => ({
    ...m,
    content: typeof m.content === "string" ? m.content : (m.content ?? []).filter((p) => p.type === "text").map((p) => p.text ?? "").join(""),
  }));
  const tokenizer = needTokenizer(ctx, "a chat completion");
  let prompt: number[];
  try {
    prompt = tokenizer.applyChatTemplate(messages, { addGenerationPrompt: b.add_generation_prompt ?? true }) as number[];
  } catch (e) {
    throw badRequest(`cannot apply the chat template: ${(e as Error).message}`, "messages");
  }
  const prompts = [prompt];
  const params = samplingParams(ctx, b, resolveMaxTokens(ctx, prompts, b.max_completion_tokens ?? b.max_tokens, Infinity));
  if (b.logprobs) params.logprobs = b.top_logprobs ?? 0;
  const entry = (t: number, logprob: number) => {
    const token = b.return_tokens_as_token_ids ? `token_id:${t}` : tokenizer.decode([t]);
    return { token, logprob, bytes: [...Buffer.from(token, "utf8")] };
  };
  const logprobs = (lps: TokenLogprob[]) => (b.logprobs
    ? { content: lps.map((lp) => ({ ...entry(lp.token, lp.logprob), top_logprobs: lp.top.map((t) => entry(t.token, t.logprob)) })) }
    : null);
  await respond(ctx, req, reply, b, prompts, params, "chat.completion", {
    chunk: (c, text, finish, first) => ({
      index: c.index,
      delta: finish && text === "" && !first ? {} : first ? { role: "assistant", content: text } : { content: text },
      logprobs: logprobs(c.unsent),
      finish_reason: finish ?? null,
    }),
    full: (c) => ({ index: c.index, message: { role: "assistant", content: c.out.text }, logprobs: logprobs(c.logprobs), finish_reason: c.finish }),
  });
}
