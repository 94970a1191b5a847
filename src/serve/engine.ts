/**
 * The serving engine: sequences in, tokens out, many sequences per model step. Each iteration asks
 * the scheduler for chunks, runs ONE forward over all their tokens as a ragged batch (batch 1,
 * every token with its own sequence and position; attention reads the paged KV cache through the
 * block tables), samples a token for every sequence whose chunk reached its end, and reports it.
 * Tokens that need logits are placed last, so the model computes logits for those rows only.
 * Between iterations the event loop runs, so new requests join and cancellations land at the next
 * step.
 */
import { argmax } from "../tensor/ops.js";
import { pagedKernelsTake } from "../tensor/paged_attention.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import type { PreTrainedModel } from "../transformers/modeling_utils.js";
import { BlockPool } from "./block_pool.js";
import { PagedKVCache, type KVShape, type PoolDType } from "./paged_kv_cache.js";
import { Sampler } from "./sampler.js";
import { Scheduler, type ScheduledChunk } from "./scheduler.js";
import { Sequence, type FinishReason, type SamplingParams, type TokenEvent, type TokenListener } from "./sequence.js";

export interface EngineOptions {
  /** Sequences running at most. */
  maxNumSeqs: number;
  /** Tokens per step at most (prefill chunk budget). */
  maxNumBatchedTokens: number;
  /** Longest sequence (prompt + output); at most the model's max positions. */
  maxModelLen?: number;
  /** Positions per KV block. */
  blockSize: number;
  /** Bytes for the KV cache (rounded down to whole blocks). */
  kvCacheBytes: number;
  /** Waiting sequences at most; beyond, add() throws QueueFullError. */
  maxQueue: number;
  /**
   * Dtype of the KV block pools. Default: the model's dtype when it is bfloat16 or float16 (as
   * generate caches keys/values), else float32; float32 on webgpu, whose paged kernels read float32.
   */
  kvCacheDtype?: PoolDType;
}

/** What the engine reports to metrics (serve/metrics.ts implements it). */
export interface EngineObserver {
  step(info: { running: number; waiting: number; kvUsage: number; tokens: number }): void;
  firstToken(seq: Sequence): void;
  token(seq: Sequence, interval: number): void;
  finished(seq: Sequence): void;
  prefix(queries: number, hits: number): void;
}

export class QueueFullError extends Error {}

/** KV shapes of a decoder from its config (num_key_value_heads, head_dim or hidden / heads). */
export function kvShapeOf(model: PreTrainedModel): KVShape {
  const c = model.config as Record<string, unknown>;
  const heads = (c.num_attention_heads ?? c.n_head) as number;
  const hidden = (c.hidden_size ?? c.n_embd) as number;
  return { numLayers: model.numLayers, numKvHeads: (c.num_key_value_heads ?? heads) as number, headDim: (c.head_dim as number | undefined) ?? hidden / heads };
}

export class Engine {
  readonly pool: BlockPool;
  readonly scheduler: Scheduler;
  readonly cache: PagedKVCache;
  readonly maxModelLen: number;
  private readonly samplers = new WeakMap<Sequence, Sampler>();
  private nextId = 0;
  private looping = false;
  private idleWaiters: (() => void)[] = [];
  observer: EngineObserver | null = null;

  constructor(readonly model: PreTrainedModel, readonly o: EngineOptions) {
    const recompute = model.cacheRecomputeLength() ?? Infinity;
    this.maxModelLen = Math.min(o.maxModelLen ?? Infinity, model.maxPositions, recompute);
    const shape = kvShapeOf(model);
    const half = model.dtype === "bfloat16" || model.dtype === "float16";
    // The pools' dtype: the model's half dtype where the device's paged kernels take it (cpu; not webgpu's).
    const takes = (d: string) => pagedKernelsTake(model.device.type, d);
    const dtype: PoolDType = o.kvCacheDtype ?? (half && takes(model.dtype) ? model.dtype as PoolDType : "float32");
    if (!takes(dtype)) throw new Error(`kvCacheDtype ${dtype}: the ${model.device.type} device's paged-attention kernels do not take ${dtype} KV pools; use float32`);
    const blockBytes = PagedKVCache.blockBytes(shape, o.blockSize, dtype);
    const numBlocks = Math.floor(o.kvCacheBytes / blockBytes);
    const needed = Math.ceil(this.maxModelLen / o.blockSize);
    if (numBlocks < needed) {
      throw new RangeError(`KV cache of ${o.kvCacheBytes} bytes holds ${numBlocks} blocks of ${o.blockSize} positions (${blockBytes} bytes each); one sequence of max-model-len ${this.maxModelLen} needs ${needed}: raise --kv-cache-memory or lower --max-model-len`);
    }
    this.pool = new BlockPool(numBlocks, o.blockSize);
    this.scheduler = new Scheduler(this.pool, o);
    this.cache = new PagedKVCache(shape, numBlocks, o.blockSize, model.device, dtype);
  }

  get numWaiting(): number { return this.scheduler.waiting.length; }
  get numRunning(): number { return this.scheduler.running.length; }

  /** True when `count` more sequences fit in the waiting queue (maxQueue). */
  canAccept(count: number): boolean {
    return this.numWaiting + count <= this.o.maxQueue;
  }

  /**
   * Queue a sequence. Throws RangeError when the prompt is empty, holds an id outside the vocabulary
   * or does not leave room for one new token, and QueueFullError when the waiting queue is full.
   */
  add(prompt: readonly number[], params: SamplingParams, onToken: TokenListener): Sequence {
    this.checkPrompt(prompt);
    if (!this.canAccept(1)) throw new QueueFullError(`the waiting queue is full (${this.o.maxQueue} sequences); retry later`);
    const seq = new Sequence(this.nextId++, prompt, params, onToken);
    this.samplers.set(seq, new Sampler(params));
    this.scheduler.add(seq);
    this.kick();
    return seq;
  }

  /** Throws RangeError for an empty prompt, an id outside the vocabulary, or no room for a new token. */
  checkPrompt(prompt: readonly number[]): void {
    if (prompt.length === 0) throw new RangeError("the prompt is empty");
    this.model.checkIds([prompt as number[]]);
    if (prompt.length + 1 > this.maxModelLen) throw new RangeError(`the prompt has ${prompt.length} tokens; the maximum context length is ${this.maxModelLen}, with room for at least one new token`);
  }

  /** Stop a sequence (client gone): its blocks are freed now, it reports nothing more. */
  abort(seq: Sequence): void {
    if (seq.finished) return;
    this.finish(seq, "abort");
  }

  /** Resolves when no sequence is waiting or running. */
  whenIdle(): Promise<void> {
    if (!this.scheduler.hasWork) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private kick(): void {
    if (this.looping) return;
    this.looping = true;
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      while (this.scheduler.hasWork) {
        const chunks = this.scheduler.schedule();
        if (chunks.length) await this.step(chunks);
        await new Promise<void>((r) => setImmediate(r));
      }
    } catch (e) {
      // A failed step fails every sequence in flight rather than the process.
      const err = e as Error;
      process.stderr.write(`tsorch serve: engine step failed: ${err.message}\n`);
      for (const seq of [...this.scheduler.running, ...this.scheduler.waiting]) this.finish(seq, "abort");
    } finally {
      this.looping = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      waiters.forEach((w) => w());
      if (this.scheduler.hasWork) this.kick();
    }
  }

  /** One forward over the chunks' tokens, then sampling and reporting. */
  private async step(chunks: ScheduledChunk[]): Promise<void> {
    const ids: number[] = [], pos: number[] = [], row: number[] = [];
    const put = (c: ScheduledChunk, r: number, from: number, n: number) => {
      const tokens = c.seq.tokens;
      for (let p = from; p < from + n; p++) {
        ids.push(tokens[p]);
        pos.push(p);
        row.push(r);
      }
    };
    chunks.forEach((c, r) => put(c, r, c.start, c.sample ? c.count - 1 : c.count));
    const sampled = chunks.filter((c) => c.sample);
    chunks.forEach((c, r) => { if (c.sample) put(c, r, c.start + c.count - 1, 1); });
    this.observer?.step({ running: this.numRunning, waiting: this.numWaiting, kvUsage: this.pool.numUsed / this.pool.numBlocks, tokens: ids.length });

    const { logits, next } = tidy(() => {
      this.cache.setStep({ tokenSeq: row, tokenPos: pos, blockTables: chunks.map((c) => c.seq.blocks) });
      const lg = this.model.forward({
        inputIds: this.model.idsTensor([ids]), positionIds: [pos], attentionMask: null, cache: this.cache, logitsToKeep: Math.max(1, sampled.length),
      });
      return { logits: lg, next: argmax(lg, -1) };
    });
    const samplers = sampled.map((c) => this.samplers.get(c.seq)!);
    const needRows = sampled.some((c, i) => !samplers[i].greedy || c.seq.params.logprobs !== undefined);
    const [nextIds, rows] = await Promise.all([next.data(), needRows ? logits.data() : null]);
    release(logits, next);

    this.scheduler.commit(chunks.filter((c) => !c.seq.finished));
    const V = logits.shape[2], now = performance.now();
    sampled.forEach((c, i) => {
      const seq = c.seq;
      if (seq.finished) return;
      const logitRow = rows ? (rows as Float32Array).subarray(i * V, (i + 1) * V) : null;
      const event: TokenEvent = { token: Number(nextIds[i]) };
      // The row is this step's own copy: the sampler edits it in place unless the logprobs need it after.
      const logprobs = logitRow && seq.params.logprobs !== undefined, lse = logprobs ? logSumExp(logitRow) : 0;
      if (logprobs) Object.assign(event, logprobsOf(logitRow, seq.params.logprobs!, lse));
      if (!samplers[i].greedy) event.token = samplers[i].choose(logprobs ? logitRow.slice() : logitRow!, seq.prompt, seq.output);
      if (logprobs) event.logprob = logitRow[event.token] - lse;
      seq.output.push(event.token);
      if (seq.output.length === 1) {
        seq.firstTokenAt = now;
        this.observer?.firstToken(seq);
        this.observer?.prefix(Math.floor((seq.prompt.length - 1) / this.pool.blockSize) * this.pool.blockSize, seq.cachedPrompt);
      } else this.observer?.token(seq, now - seq.lastTokenAt);
      seq.lastTokenAt = now;
      const p = seq.params;
      if (!p.ignoreEos && p.stopTokenIds.includes(event.token)) event.finish = "stop";
      else if (seq.output.length >= p.maxTokens || seq.length >= this.maxModelLen) event.finish = "length";
      if (seq.onToken(event) === "stop") event.finish = "stop";
      if (event.finish) this.finish(seq, event.finish);
    });
  }

  private finish(seq: Sequence, reason: FinishReason): void {
    this.scheduler.remove(seq);
    seq.status = "finished";
    seq.finishReason = reason;
    if (reason === "abort") seq.onToken({ token: -1, finish: "abort" });
    this.observer?.finished(seq);
  }
}

function release(...ts: Tensor[]): void {
  for (const t of ts) t.device.release?.(t.storage);
}

/** log(sum(exp(row))), computed from the row's maximum. */
function logSumExp(row: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > max) max = row[i];
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
  return max + Math.log(sum);
}

/** The `k` most likely tokens of the model's distribution, with their log-probabilities (lse: the row's logSumExp). */
function logprobsOf(row: Float32Array, k: number, lse: number): Pick<TokenEvent, "top"> {
  if (k === 0) return { top: [] };
  const top: { token: number; logprob: number }[] = [];
  for (let i = 0; i < row.length; i++) {
    if (top.length === k && row[i] <= top[k - 1].logprob) continue;
    top.push({ token: i, logprob: row[i] });
    top.sort((a, b) => b.logprob - a.logprob);
    if (top.length > k) top.pop();
  }
  return { top: top.map((t) => ({ token: t.token, logprob: t.logprob - lse })) };
}
