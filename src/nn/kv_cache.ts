/**
 * What attention needs from a layer's KV cache. nn/ defines it and transformers/cache_utils.ts
 * implements it (LayerKVCache: dynamic and static caches, sliding windows), so nn/ depends on
 * nothing above it.
 */
import type { Tensor } from "../tensor/tensor.js";

export interface AttentionKVCache {
  /**
   * Append k [B, L, Hkv, D] and v [B, L, Hkv, Dv] (heads not transposed) and return the keys and
   * values to attend to, [B, Hkv, Lk, D] / [B, Hkv, Lk, Dv]: the cached positions, then the new
   * ones. With `window` > 0 (a sliding-window layer) only the last positions a query can see.
   */
  update(k: Tensor, v: Tensor, window?: number): { keys: Tensor; values: Tensor };
}
