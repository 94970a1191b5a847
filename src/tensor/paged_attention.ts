/**
 * Ops of a paged KV cache (vLLM's PagedAttention): keys and values live in fixed-size blocks of a
 * pool, and each sequence names its blocks in a block table. `pagedKVWrite` stores new keys/values
 * at their slots; `pagedAttention` attends a ragged batch of query tokens (any mix of sequences and
 * positions) to their sequences' cached keys through the block tables.
 */
import { getKernel } from "../devices/kernels.js";
import { checkSameDevice, empty } from "./ops.js";
import type { Tensor } from "./tensor.js";

function expect(op: string, name: string, t: Tensor, dtype: string, ndim: number): void {
  if (t.dtype !== dtype || t.ndim !== ndim) throw new TypeError(`${op}: ${name} must be a ${ndim}-D ${dtype} tensor, got [${t.shape}] ${t.dtype}`);
}

/** Dtypes a block pool may hold: float32, or a half-precision KV cache in the model's dtype. */
export const POOL_DTYPES = ["float32", "bfloat16", "float16"] as const;

function checkPools(op: string, kCache: Tensor, vCache: Tensor): void {
  if (!(POOL_DTYPES as readonly string[]).includes(kCache.dtype)) throw new TypeError(`${op}: kCache must be float32, bfloat16 or float16, got ${kCache.dtype}`);
  expect(op, "kCache", kCache, kCache.dtype, 4);
  expect(op, "vCache", vCache, kCache.dtype, 4);
  const [N, bs, H] = kCache.shape;
  if (vCache.shape[0] !== N || vCache.shape[1] !== bs || vCache.shape[2] !== H) {
    throw new RangeError(`${op}: kCache [${kCache.shape}] and vCache [${vCache.shape}] must agree on blocks, block size and heads`);
  }
  if (!kCache.isContiguous || !vCache.isContiguous) throw new RangeError(`${op}: the block pools must be contiguous`);
}

/**
 * Store k [T, Hkv, D] and v [T, Hkv, Dv] into the pools kCache [N, bs, Hkv, D] / vCache
 * [N, bs, Hkv, Dv] (float32, bfloat16 or float16, one dtype, contiguous, written in place: values
 * rounded to the pools' dtype) at `slots` [T] int32
 * (slot = block * bs + offset in block). Throws on mismatched shapes or dtypes; a kernel that can
 * read the slots throws RangeError for one outside [0, N * bs).
 */
export function pagedKVWrite(k: Tensor, v: Tensor, kCache: Tensor, vCache: Tensor, slots: Tensor): void {
  const op = "paged_kv_write";
  checkSameDevice(op, k, v, kCache, vCache, slots);
  checkPools(op, kCache, vCache);
  expect(op, "slots", slots, "int32", 1);
  const T = slots.shape[0];
  const [, , H, D] = kCache.shape, Dv = vCache.shape[3];
  if (k.ndim !== 3 || k.shape[0] !== T || k.shape[1] !== H || k.shape[2] !== D || v.ndim !== 3 || v.shape[0] !== T || v.shape[1] !== H || v.shape[2] !== Dv) {
    throw new RangeError(`${op}: k [${k.shape}] / v [${v.shape}] must be [${T}, ${H}, ${D}] / [${T}, ${H}, ${Dv}] for ${T} slots and pools [${kCache.shape}] / [${vCache.shape}]`);
  }
  if (T === 0) return;
  getKernel("pagedKVWrite", k.device.type)(k.to("float32").contiguous(), v.to("float32").contiguous(), kCache, vCache, slots.contiguous());
}

export interface PagedAttentionOptions {
  /** Score scale (default D^-0.5). */
  scale?: number;
  /** tanh soft-capping of the scores; 0 or absent = none. */
  softcap?: number;
  /** Sliding window in keys; 0 or absent = unlimited. */
  window?: number;
}

/**
 * Causal attention of T query tokens through a paged KV cache. q [T, Hq, D] (Hq a multiple of the
 * pools' Hkv); kCache [N, bs, Hkv, D], vCache [N, bs, Hkv, Dv]; blockTables [S, maxBlocks] int32;
 * tokenSeq [T] int32 (each token's row of blockTables); tokenPos [T] int32 (each token's position:
 * it sees its sequence's keys at positions <= pos, and > pos - window with a window). The keys of
 * every position seen must already be written (pagedKVWrite). Returns float32 [T, Hq, Dv].
 */
export function pagedAttention(q: Tensor, kCache: Tensor, vCache: Tensor, blockTables: Tensor, tokenSeq: Tensor, tokenPos: Tensor, o: PagedAttentionOptions = {}): Tensor {
  const op = "paged_attention";
  const device = checkSameDevice(op, q, kCache, vCache, blockTables, tokenSeq, tokenPos);
  checkPools(op, kCache, vCache);
  expect(op, "blockTables", blockTables, "int32", 2);
  expect(op, "tokenSeq", tokenSeq, "int32", 1);
  expect(op, "tokenPos", tokenPos, "int32", 1);
  if (q.ndim !== 3) throw new RangeError(`${op}: q must be [T, Hq, D], got [${q.shape}]`);
  const [T, Hq, D] = q.shape, Hkv = kCache.shape[2], Dv = vCache.shape[3];
  if (kCache.shape[3] !== D || Hq % Hkv !== 0) throw new RangeError(`${op}: q [${q.shape}] does not fit kCache [${kCache.shape}] (head size ${D}, query heads a multiple of ${Hkv})`);
  if (tokenSeq.shape[0] !== T || tokenPos.shape[0] !== T) throw new RangeError(`${op}: tokenSeq [${tokenSeq.shape}] and tokenPos [${tokenPos.shape}] must have one entry per query token (${T})`);
  const out = empty([T, Hq, Dv], "float32", device);
  if (out.numel > 0) {
    getKernel("pagedAttention", device.type)(q.to("float32").contiguous(), kCache, vCache, blockTables.contiguous(), tokenSeq.contiguous(), tokenPos.contiguous(), out, {
      scale: o.scale ?? D ** -0.5, softcap: o.softcap ?? 0, window: o.window ?? 0,
    });
  }
  return out;
}
