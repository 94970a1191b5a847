/**
 * The OpenAI-compatible HTTP server (Fastify): /v1/models, /v1/completions, /v1/chat/completions,
 * /tokenize, /detokenize, /health and Prometheus /metrics, over one Engine. Request bodies are
 * validated against JSON schemas and bounded in size; every error is OpenAI's error JSON with its
 * status (400 malformed, 401 missing key, 404 unknown model or route, 413 body too large,
 * 429 queue full with Retry-After, 503 while draining). With an API key, every /v1 route needs
 * `Authorization: Bearer KEY`, compared in constant time.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyError, type FastifyInstance } from "fastify";
import type { PreTrainedModel } from "../transformers/modeling_utils.js";
import type { PreTrainedTokenizer } from "../transformers/tokenization.js";
import { Engine, QueueFullError, type EngineOptions } from "./engine.js";
import { chatCompletions, completions, needTokenizer, type RouteContext } from "./generation_routes.js";
import { ServeMetrics } from "./metrics.js";
import { ApiError, badRequest, chatSchema, completionSchema, describeSchemaErrors, detokenizeSchema, tokenizeSchema, type SchemaError } from "./protocol.js";

export interface ServerOptions extends EngineOptions {
  /** The model name clients send (`model`); requests naming another get 404. */
  servedModelName: string;
  /** Required bearer token of /v1 routes; undefined = open. */
  apiKey?: string;
  /** Largest request body, bytes (larger: 413). */
  maxBodyBytes: number;
}

export interface OpenAIServer {
  app: FastifyInstance;
  engine: Engine;
  metrics: ServeMetrics;
  /** Stop accepting generation requests (503, /health too), wait for running ones up to `timeoutMs`, then close. */
  drain(timeoutMs: number): Promise<void>;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Build the server (not listening yet: call `app.listen`). Without a tokenizer, prompts must be token ids. */
export function createServer(model: PreTrainedModel, tokenizer: PreTrainedTokenizer | null, o: ServerOptions): OpenAIServer {
  const engine = new Engine(model, o);
  const metrics = new ServeMetrics(o.servedModelName, () => ({
    running: engine.numRunning, waiting: engine.numWaiting, kvUsage: engine.pool.numUsed / engine.pool.numBlocks, preemptions: engine.scheduler.preemptions,
  }));
  engine.observer = metrics;
  const eos = [model.generationConfig.eos_token_id, model.config.eos_token_id, tokenizer?.eosTokenId].flat().filter((x): x is number => typeof x === "number");
  const ctx: RouteContext = { engine, tokenizer, servedModelName: o.servedModelName, eosIds: [...new Set(eos)] };
  let draining = false;

  const app = Fastify({
    bodyLimit: o.maxBodyBytes,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
  });

  // A model step blocks the event loop (seconds for a long prefill chunk on cpu), so requests that
  // arrived meanwhile are read late: Node's 60 s default for receiving headers would answer 408.
  app.server.headersTimeout = 10 * 60_000;

  const key = o.apiKey === undefined ? null : digest(o.apiKey);
  app.addHook("onRequest", async (req) => {
    if (!key || !req.url.startsWith("/v1")) return;
    const header = req.headers.authorization ?? "";
    const token = header.startsWith("Bearer ") ? header.slice(7) : "";
    if (!timingSafeEqual(digest(token), key)) throw new ApiError(401, "Invalid or missing API key: send Authorization: Bearer <key>", "authentication_error");
  });

  app.setErrorHandler((err: FastifyError | ApiError, _req, reply) => {
    let e: ApiError;
    if (err instanceof ApiError) e = err;
    else if (err instanceof QueueFullError) e = new ApiError(429, err.message, "rate_limit_exceeded", null, { "retry-after": "1" });
    else if ((err as FastifyError).validation) {
      const { message, param } = describeSchemaErrors((err as FastifyError).validation as SchemaError[]);
      e = badRequest(`invalid request body: ${message}`, param);
    }
    else if ((err as FastifyError).statusCode === 413) e = new ApiError(413, `request body is larger than the server's limit of ${o.maxBodyBytes} bytes`, "invalid_request_error");
    else if ((err as FastifyError).statusCode && (err as FastifyError).statusCode! < 500) e = badRequest(err.message);
    else e = new ApiError(500, err.message, "server_error");
    if (reply.sent || reply.raw.headersSent) return;
    reply.code(e.status).headers(e.headers).send(e.body());
  });
  app.setNotFoundHandler((req, reply) => {
    reply.code(404).send(new ApiError(404, `no route ${req.method} ${req.url}`, "not_found_error").body());
  });

  const accepting = () => {
    if (draining) throw new ApiError(503, "the server is shutting down", "service_unavailable");
  };

  app.get("/health", async (_req, reply) => {
    if (draining) return reply.code(503).send({ status: "draining" });
    return { status: "ok" };
  });
  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  app.get("/v1/models", async () => ({
    object: "list",
    data: [{ id: o.servedModelName, object: "model", created: Math.floor(Date.now() / 1000), owned_by: "tsorch", max_model_len: engine.maxModelLen }],
  }));
  app.post("/v1/completions", { schema: { body: completionSchema } }, async (req, reply) => {
    accepting();
    await completions(ctx, req, reply);
  });
  app.post("/v1/chat/completions", { schema: { body: chatSchema } }, async (req, reply) => {
    accepting();
    await chatCompletions(ctx, req, reply);
  });
  app.post("/tokenize", { schema: { body: tokenizeSchema } }, async (req) => {
    const b = req.body as { model?: string; prompt?: string; messages?: { role: string; content?: string }[]; add_special_tokens?: boolean };
    const tokenizer = needTokenizer(ctx, "/tokenize");
    let tokens: number[];
    if (b.messages) tokens = tokenizer.applyChatTemplate(b.messages.map((m) => ({ ...m, content: m.content ?? "" })), { addGenerationPrompt: true }) as number[];
    else if (typeof b.prompt === "string") tokens = tokenizer.encode(b.prompt, { addSpecialTokens: b.add_special_tokens ?? true });
    else throw badRequest("pass `prompt` (a string) or `messages`", "prompt");
    return { tokens, count: tokens.length, max_model_len: engine.maxModelLen };
  });
  app.post("/detokenize", { schema: { body: detokenizeSchema } }, async (req) => ({ prompt: needTokenizer(ctx, "/detokenize").decode((req.body as { tokens: number[] }).tokens) }));

  const drain = async (timeoutMs: number) => {
    draining = true;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      engine.whenIdle().then(() => false),
      new Promise<boolean>((r) => { timer = setTimeout(() => r(true), timeoutMs); }),
    ]);
    clearTimeout(timer);
    if (timedOut) for (const seq of [...engine.scheduler.running, ...engine.scheduler.waiting]) engine.abort(seq);
    await app.close();
  };
  return { app, engine, metrics, drain };
}
