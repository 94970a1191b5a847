/**
 * The iteration-level scheduler (continuous batching, as vLLM's): before every model step it
 * decides which sequences run and how many of their tokens. Running sequences come first (one
 * token each while decoding, the next chunk while prefilling), then waiting ones join while there
 * is room: at most maxNumSeqs running, at most maxNumBatchedTokens tokens per step (so a long
 * prompt is prefilled in chunks and never stalls the others). When the KV blocks run out, the
 * newest running sequence is preempted: its blocks are freed and it waits again at the front, to
 * be recomputed from its prompt and the tokens it already produced.
 */
import { blockHash, BlockPool } from "./block_pool.js";
import type { Sequence } from "./sequence.js";

export interface SchedulerOptions {
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
}

/** One sequence's share of a step: its positions [start, start + count) are computed. */
export interface ScheduledChunk {
  seq: Sequence;
  start: number;
  count: number;
  /** The chunk reaches the sequence's last known token, so the step samples its next token. */
  sample: boolean;
}

export class Scheduler {
  readonly waiting: Sequence[] = [];
  readonly running: Sequence[] = [];
  preemptions = 0;

  constructor(readonly pool: BlockPool, readonly o: SchedulerOptions) {}

  get hasWork(): boolean { return this.waiting.length + this.running.length > 0; }

  add(seq: Sequence): void {
    this.waiting.push(seq);
  }

  /** Remove a sequence wherever it is and free its blocks (finished, cancelled). */
  remove(seq: Sequence): void {
    for (const list of [this.waiting, this.running]) {
      const i = list.indexOf(seq);
      if (i >= 0) list.splice(i, 1);
    }
    this.freeBlocks(seq);
  }

  /** The chunks of the next step (empty when nothing can run). */
  schedule(): ScheduledChunk[] {
    const chunks: ScheduledChunk[] = [];
    let budget = this.o.maxNumBatchedTokens;
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const seq = this.running[i];
      const count = Math.min(seq.length - seq.computed, budget);
      while (!this.reserve(seq, seq.computed + count)) {
        const victim = this.running[this.running.length - 1];
        this.preempt(victim);
        const dropped = chunks.findIndex((c) => c.seq === victim);
        if (dropped >= 0) budget += chunks.splice(dropped, 1)[0].count;
        if (victim === seq) break;
      }
      if (seq.status !== "running") break;
      chunks.push({ seq, start: seq.computed, count, sample: seq.computed + count === seq.length });
      budget -= count;
    }
    let retried = false;
    while (this.waiting.length && this.running.length < this.o.maxNumSeqs && budget > 0) {
      const seq = this.waiting[0];
      this.usePrefixCache(seq);
      const count = Math.min(seq.length - seq.computed, budget);
      if (!this.reserve(seq, seq.computed + count)) {
        // A waiting sequence holds no blocks between steps (its cached prefix stays in the LRU).
        this.freeBlocks(seq);
        if (this.running.length > 0 || chunks.length > 0) break;
        if (retried) throw new RangeError(`a sequence of ${seq.length} tokens does not fit in the KV cache (${this.pool.numBlocks} blocks of ${this.pool.blockSize}); raise --kv-cache-memory or lower --max-model-len`);
        retried = true;
        continue;
      }
      this.waiting.shift();
      seq.status = "running";
      this.running.push(seq);
      chunks.push({ seq, start: seq.computed, count, sample: seq.computed + count === seq.length });
      budget -= count;
    }
    return chunks;
  }

  /** After a step: positions computed, full blocks registered in the prefix cache. */
  commit(chunks: ScheduledChunk[]): void {
    const bs = this.pool.blockSize;
    for (const { seq, count } of chunks) {
      seq.computed += count;
      const full = Math.floor(seq.computed / bs);
      if (seq.blockHashes.length >= full) continue;
      const tokens = seq.tokens;
      for (let b = seq.blockHashes.length; b < full; b++) {
        const h = blockHash(seq.blockHashes[b - 1] ?? "", tokens.slice(b * bs, (b + 1) * bs));
        seq.blockHashes.push(h);
        this.pool.register(seq.blocks[b], h);
      }
    }
  }

  /** Take the cached blocks of the sequence's longest cached prefix (at least one token left to compute). */
  private usePrefixCache(seq: Sequence): void {
    const bs = this.pool.blockSize, tokens = seq.tokens;
    const maxBlocks = Math.floor((tokens.length - 1) / bs);
    for (let b = 0; b < maxBlocks; b++) {
      const h = blockHash(seq.blockHashes[b - 1] ?? "", tokens.slice(b * bs, (b + 1) * bs));
      const block = this.pool.lookup(h);
      if (block < 0) break;
      seq.blocks.push(block);
      seq.blockHashes.push(h);
    }
    seq.computed = seq.blocks.length * bs;
    seq.cachedPrompt = Math.min(seq.computed, seq.prompt.length);
  }

  /** Make the sequence hold blocks for `positions` positions; false (holding what it had) when the pool is short. */
  private reserve(seq: Sequence, positions: number): boolean {
    const need = Math.ceil(positions / this.pool.blockSize) - seq.blocks.length;
    if (need > this.pool.numFree) return false;
    for (let i = 0; i < need; i++) seq.blocks.push(this.pool.allocate());
    return true;
  }

  private preempt(seq: Sequence): void {
    this.running.splice(this.running.indexOf(seq), 1);
    this.freeBlocks(seq);
    seq.status = "waiting";
    this.waiting.unshift(seq);
    this.preemptions++;
  }

  private freeBlocks(seq: Sequence): void {
    for (const b of seq.blocks) this.pool.release(b);
    seq.blocks = [];
    seq.blockHashes = [];
    seq.computed = 0;
  }
}
