/**
 * Ops of a paged KV cache (vLLM's PagedAttention): keys and values live in fixed-size blocks of a
 * pool, and each sequence names its blocks in a block table. `pagedKVWrite` stores new keys/values
 * at their slots; `pagedAttention` attends a ragged batch of query tokens (any mix of sequences and
 * positions) to their sequences' cached keys through the block tables.
 */
import type { Device } from "../devices/device.js";
import { getKernel, hasKernel, kernelTakesPools } from "../devices/kernels.js";
import { checkSameDevice, empty } from "./ops.js";
import { keep } from "./scope.js";
import { Tensor } from "./tensor.js";
import { traceObserver } from "./trace.js";

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

/**
 * Whether `deviceType`'s pagedKVWrite and pagedAttention kernels take block pools of `dtype` (a
 * pool dtype the device did not restrict, devices/kernels.ts restrictPoolDtypes).
 */
export function pagedKernelsTake(deviceType: string, dtype: string): boolean {
  return (POOL_DTYPES as readonly string[]).includes(dtype)
    && kernelTakesPools("pagedKVWrite", deviceType, dtype) && kernelTakesPools("pagedAttention", deviceType, dtype);
}

/** A decode step's index tensors over caches of B rows, shared by the layers of the step (rowIndex). */
let lastIndex: { B: number; at: number; device: Device; tables: Tensor; rows: Tensor; positions: Tensor } | null = null;

/** Block tables [B, 1] (row b's one block is b), rows [B] (token b is row b) and positions [B] (all `at`). */
function rowIndex(B: number, at: number, device: Device): { tables: Tensor; rows: Tensor; positions: Tensor } {
  if (lastIndex && lastIndex.B === B && lastIndex.at === at && lastIndex.device === device) return lastIndex;
  const rows = Int32Array.from({ length: B }, (_, b) => b);
  const int32 = (a: Int32Array, shape: number[]) => keep(new Tensor(device.upload(new Uint8Array(a.buffer)), "int32", shape));
  lastIndex = { B, at, device, tables: int32(rows.slice(), [B, 1]), rows: int32(rows, [B]), positions: int32(new Int32Array(B).fill(at), [B]) };
  return lastIndex;
}

/**
 * Whether cacheDecodeAttention runs as one paged-attention kernel call for q [B, 1, Hq, D] and
 * cache buffers of dtype `dtype` (else attend through scaledDotProductAttention): eager (not
 * tracing), a device with the `pagedAttention` kernel taking pools of that dtype.
 */
export function canAttendInCache(q: Tensor, dtype: string): boolean {
  return q.ndim === 4 && q.shape[1] === 1 && traceObserver() === null && hasKernel("pagedAttention", q.device.type)
    && pagedKernelsTake(q.device.type, dtype);
}

/**
 * Decode attention read in place from a KV cache laid out [B, capacity, Hkv, D|Dv] (the dynamic
 * cache's buffers, transformers/cache_utils.ts): the buffers are paged pools of B blocks of
 * `capacity` positions, row b's block table [b], so pagedAttention's decode path (all heads of a
 * row in one pass, no copies) attends them. q [B, 1, Hq, D] float (rotary applied), one new
 * position per row at `at`, whose keys and values are already written; each row sees positions
 * [0, at]. Causal, no padding mask, no sinks (the caller falls back to scaledDotProductAttention
 * for those). Returns float32 [B, 1, Hq * Dv]. Throws RangeError for q not [B, 1, Hq, D], buffers
 * not of B rows or `at` outside them; other errors are pagedAttention's.
 */
export function cacheDecodeAttention(q: Tensor, keyBuffer: Tensor, valueBuffer: Tensor, at: number, o: PagedAttentionOptions = {}): Tensor {
  const op = "cache_decode_attention";
  const [B, , Hq, D] = q.shape, capacity = keyBuffer.shape[1];
  if (q.ndim !== 4 || q.shape[1] !== 1) throw new RangeError(`${op}: q must be [B, 1, Hq, D] (one new position per row), got [${q.shape}]`);
  if (keyBuffer.ndim !== 4 || keyBuffer.shape[0] !== B) throw new RangeError(`${op}: the cache buffers [${keyBuffer.shape}] must be [${B}, capacity, Hkv, D] for q [${q.shape}]`);
  if (!Number.isInteger(at) || at < 0 || at >= capacity) throw new RangeError(`${op}: position ${at} is outside the cache's ${capacity} positions`);
  const { tables, rows, positions } = rowIndex(B, at, q.device);
  return pagedAttention(q.reshape(B, Hq, D), keyBuffer, valueBuffer, tables, rows, positions, o).view(B, 1, Hq * valueBuffer.shape[3]);
}
