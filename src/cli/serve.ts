/**
 * `tsorch serve`: load a model and its tokenizer, start the OpenAI-compatible server (serve/), and
 * on SIGTERM / SIGINT stop accepting, let running requests finish (--drain-timeout), then exit 0.
 */
import { DEFAULT_MODEL, DEFAULT_MODEL_NAME } from "./default_model.js";
import { existsSync } from "node:fs";
import { isIP } from "node:net";
import * as path from "node:path";
import { resolveModel } from "../hub/index.js";
import { createServer } from "../serve/server.js";
import { AutoModelForCausalLM } from "../transformers/index.js";
import { PreTrainedTokenizer } from "../transformers/index.js";
import { numberFlag, parseFlags, UsageError } from "./args.js";

export const SERVE_USAGE = `usage: tsorch serve --model DIR_OR_HUB_ID [options]
  --device cpu|webgpu          --dtype float32|bfloat16|float16|auto
  --host 127.0.0.1             --port 8000
  --api-key KEY                (or env TSORCH_API_KEY) required as "Authorization: Bearer KEY" on /v1
  --served-model-name NAME     the model name clients send (default: the --model argument)
  --max-num-seqs 64            sequences running at once
  --max-num-batched-tokens 512   tokens per engine step (prefill chunk budget)
  --max-model-len N            longest prompt + output (default: the model's max positions)
  --max-queue 256              waiting sequences at most (beyond: 429)
  --block-size 16              positions per KV-cache block
  --kv-cache-memory 2GiB       KV-cache size (B, KiB, MiB, GiB)
  --max-body-bytes 1MiB        largest request body (beyond: 413)
  --drain-timeout 30           seconds running requests get to finish after SIGTERM`;

/** "2GiB", "512MiB", "1e9" -> bytes; throws a UsageError naming the flag. */
export function parseBytes(flag: string, v: string): number {
  const m = /^(\d+(?:\.\d+)?(?:e\d+)?)\s*(B|KiB|MiB|GiB|KB|MB|GB)?$/i.exec(v.trim());
  if (!m) throw new UsageError(`--${flag} expects a size such as 2GiB or 512MiB, got '${v}'`);
  const unit = (m[2] ?? "B").toLowerCase();
  const scale: Record<string, number> = { b: 1, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, kb: 1e3, mb: 1e6, gb: 1e9 };
  return Math.floor(Number(m[1]) * scale[unit]);
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || (isIP(host) === 4 && host.startsWith("127."));
}

export async function serveCommand(argv: string[]): Promise<void> {
  const v = parseFlags(argv, {
    model: { type: "string" }, device: { type: "string" }, dtype: { type: "string" }, revision: { type: "string" },
    host: { type: "string" }, port: { type: "string" }, "api-key": { type: "string" }, "served-model-name": { type: "string" },
    "max-num-seqs": { type: "string" }, "max-num-batched-tokens": { type: "string" }, "max-model-len": { type: "string" },
    "max-queue": { type: "string" }, "block-size": { type: "string" }, "kv-cache-memory": { type: "string" },
    "max-body-bytes": { type: "string" }, "drain-timeout": { type: "string" },
  });
  if (typeof v.model !== "string") throw new UsageError("--model is required (a folder or a Hub id such as org/name)");
  const positive = (name: string, fallback: number) => {
    const n = numberFlag(v, name, true) ?? fallback;
    if (n < 1) throw new UsageError(`--${name} must be a positive integer, got ${n}`);
    return n;
  };
  const host = (v.host as string | undefined) ?? "127.0.0.1";
  const port = numberFlag(v, "port", true) ?? 8000;
  if (port < 0 || port > 65535) throw new UsageError(`--port must be an integer in [0, 65535], got ${port}`);
  const apiKey = (v["api-key"] as string | undefined) ?? process.env.TSORCH_API_KEY ?? undefined;
  const opts = {
    servedModelName: (v["served-model-name"] as string | undefined) ?? (v.model === DEFAULT_MODEL ? DEFAULT_MODEL_NAME : v.model),
    apiKey: apiKey === "" ? undefined : apiKey,
    maxNumSeqs: positive("max-num-seqs", 64),
    maxNumBatchedTokens: positive("max-num-batched-tokens", 512),
    maxModelLen: v["max-model-len"] === undefined ? undefined : positive("max-model-len", 0),
    maxQueue: positive("max-queue", 256),
    blockSize: positive("block-size", 16),
    kvCacheBytes: parseBytes("kv-cache-memory", (v["kv-cache-memory"] as string | undefined) ?? "2GiB"),
    maxBodyBytes: parseBytes("max-body-bytes", (v["max-body-bytes"] as string | undefined) ?? "1MiB"),
  };
  const drainTimeout = numberFlag(v, "drain-timeout") ?? 30;

  const dir = await resolveModel(v.model, { revision: v.revision as string | undefined });
  const model = await AutoModelForCausalLM.fromPretrained(dir, { device: v.device as string | undefined, dtype: v.dtype as string | undefined });
  const tokenizer = existsSync(path.join(dir, "tokenizer.json")) ? await PreTrainedTokenizer.fromPretrained(dir) : null;
  if (!tokenizer) process.stderr.write(`tsorch serve: ${dir} has no tokenizer.json: serving token ids only (prompts as id lists, empty texts)\n`);
  const server = createServer(model, tokenizer, opts);
  if (!opts.apiKey && !isLoopback(host)) {
    process.stderr.write(`tsorch serve: warning: listening on ${host} without an API key; anyone who can reach it can use it (pass --api-key or set TSORCH_API_KEY)\n`);
  }
  // Signal handlers go in before listening, so a SIGTERM right after start-up still drains.
  let listening: Promise<unknown> = Promise.resolve();
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      process.stderr.write(`tsorch serve: ${signal}: draining (up to ${drainTimeout} s)\n`);
      listening.catch(() => {}).then(() => server.drain(drainTimeout * 1000)).then(resolve, (e: Error) => {
        process.stderr.write(`tsorch serve: drain failed: ${e.message}\n`);
        resolve();
      });
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  listening = server.app.listen({ host, port });
  const address = await listening;
  process.stderr.write(`tsorch serve: ${opts.servedModelName} on ${address}/v1 (${server.engine.pool.numBlocks} KV blocks of ${opts.blockSize}, max-model-len ${server.engine.maxModelLen})\n`);
  await stopped;
  process.stderr.write("tsorch serve: stopped\n");
}
