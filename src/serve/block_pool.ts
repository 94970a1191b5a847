/**
 * The KV-cache block allocator with prefix caching (vLLM's BlockPool / KVCacheManager): a fixed
 * number of blocks, each holding `blockSize` token positions of every layer. Blocks are
 * reference-counted; a full block is registered under the hash of its whole token prefix, so a
 * later sequence with the same prefix reuses it instead of recomputing it. A cached block whose
 * last user is gone stays cached, least recently used first in line for eviction.
 */
import { createHash } from "node:crypto";

/** Hash of a full block: its parent block's hash and its own token ids (so it names the whole prefix). */
export function blockHash(parent: string, tokens: readonly number[]): string {
  return createHash("sha256").update(parent).update(",").update(tokens.join(",")).digest("hex");
}

export class BlockPool {
  private readonly refs: Int32Array;
  private readonly hashOf: (string | undefined)[];
  private readonly byHash = new Map<string, number>();
  /** Blocks that nobody uses and that hold no cached prefix. */
  private readonly free: number[];
  /** Cached blocks that nobody uses, least recently used first (Map keeps insertion order). */
  private readonly evictable = new Map<number, true>();
  /** Prefix-cache lookups and hits, in blocks. */
  queries = 0;
  hits = 0;

  constructor(readonly numBlocks: number, readonly blockSize: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new RangeError(`the KV cache needs at least one block, got ${numBlocks}`);
    this.refs = new Int32Array(numBlocks);
    this.hashOf = new Array(numBlocks);
    this.free = Array.from({ length: numBlocks }, (_, i) => numBlocks - 1 - i);
  }

  /** Blocks that can be allocated now (free or evictable). */
  get numFree(): number { return this.free.length + this.evictable.size; }
  /** Blocks held by at least one sequence. */
  get numUsed(): number { return this.numBlocks - this.numFree; }

  /** Take a block (evicting the least recently used cached one if needed), or -1 when none is left. */
  allocate(): number {
    let b = this.free.pop();
    if (b === undefined) {
      const lru = this.evictable.keys().next();
      if (lru.done) return -1;
      b = lru.value;
      this.evictable.delete(b);
      this.byHash.delete(this.hashOf[b]!);
      this.hashOf[b] = undefined;
    }
    this.refs[b] = 1;
    return b;
  }

  /** Drop one reference; a block nobody uses returns to the free list, or to the LRU when cached. */
  release(block: number): void {
    if (this.refs[block] <= 0) throw new Error(`KV block ${block} released more often than it was taken`);
    if (--this.refs[block] > 0) return;
    if (this.hashOf[block] !== undefined) this.evictable.set(block, true);
    else this.free.push(block);
  }

  /** The cached block holding the prefix `hash` (now referenced once more), or -1. Counts a query. */
  lookup(hash: string): number {
    this.queries++;
    const b = this.byHash.get(hash);
    if (b === undefined) return -1;
    this.hits++;
    if (this.refs[b]++ === 0) this.evictable.delete(b);
    return b;
  }

  /** Record that `block` (full, computed) holds the prefix `hash`; a prefix cached already is kept as is. */
  register(block: number, hash: string): void {
    if (this.byHash.has(hash) || this.hashOf[block] !== undefined) return;
    this.byHash.set(hash, block);
    this.hashOf[block] = hash;
  }
}
