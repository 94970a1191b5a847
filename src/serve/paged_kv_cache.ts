/**
 * The paged KV cache as the model sees it: a KVCache whose layers attend through block tables
 * (nn/attention's SelfAttendingCache). One pool per layer, [numBlocks, blockSize, Hkv, D] keys
 * and [numBlocks, blockSize, Hkv, Dv] values (float32, or bfloat16 / float16: the cache in the
 * model's dtype, as generate keeps it), on the model's device. Before each step
 * the engine describes the ragged batch (`setStep`): every token's sequence row, position and
 * slot, and the block table of every sequence; each layer then writes its new keys/values to their
 * slots and attends through the block tables.
 */
import type { Device } from "../devices/device.js";
import type { CausalAttentionOptions } from "../nn/attention.js";
import { fromBytes } from "../tensor/creation.js";
import { encode } from "../tensor/host.js";
import { empty } from "../tensor/ops.js";
import { pagedAttention, pagedKVWrite } from "../tensor/paged_attention.js";
import { keep } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import type { DType } from "../tensor/dtype.js";
import { KVCache, SelfAttendingLayer } from "../transformers/cache_utils.js";
import type { LinearAttentionState } from "../transformers/cache_linear_attention.js";

/** Dtypes of the block pools. */
export type PoolDType = Extract<DType, "float32" | "bfloat16" | "float16">;

/** Shapes of the attention layers' keys/values. */
export interface KVShape {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
}

/** The ragged batch of one step (host arrays; the cache uploads them). */
export interface StepLayout {
  /** Sequence row (into blockTables) of every token. */
  tokenSeq: number[];
  /** Position of every token in its sequence. */
  tokenPos: number[];
  /** Block of every sequence row's positions, padded with 0 to a common width. */
  blockTables: number[][];
}

interface StepTensors {
  seq: Tensor;
  pos: Tensor;
  slots: Tensor;
  tables: Tensor;
}

export class PagedKVCache extends KVCache {
  private readonly kPools: Tensor[] = [];
  private readonly vPools: Tensor[] = [];
  private step: StepTensors | null = null;

  /** Bytes of one block over every layer (keys and values of `dtype`). */
  static blockBytes(s: KVShape, blockSize: number, dtype: PoolDType = "float32"): number {
    return s.numLayers * blockSize * s.numKvHeads * s.headDim * 2 * (dtype === "float32" ? 4 : 2);
  }

  constructor(readonly shape: KVShape, readonly numBlocks: number, readonly blockSize: number, readonly device: Device, dtype: PoolDType = "float32") {
    super(0, "dynamic", 0, dtype);
    for (let i = 0; i < shape.numLayers; i++) {
      this.layers.push(new SelfAttendingLayer(this, i, "dynamic", "the paged KV cache attends through block tables; it cannot return contiguous keys"));
      this.kPools.push(keep(empty([numBlocks, blockSize, shape.numKvHeads, shape.headDim], dtype, device)));
      this.vPools.push(keep(empty([numBlocks, blockSize, shape.numKvHeads, shape.headDim], dtype, device)));
    }
  }

  override linearAttention(_layer: number): LinearAttentionState {
    throw new Error("serve: models with linear-attention layers (e.g. Gated DeltaNet) are not supported by the paged KV cache");
  }

  /** Describe the next forward's tokens (their slots follow from positions and block tables). */
  setStep(l: StepLayout): void {
    const bs = this.blockSize;
    const slots = l.tokenPos.map((p, t) => l.blockTables[l.tokenSeq[t]][Math.floor(p / bs)] * bs + (p % bs));
    const width = Math.max(1, ...l.blockTables.map((r) => r.length));
    const tables = l.blockTables.flatMap((r) => [...r, ...new Array<number>(width - r.length).fill(0)]);
    const i32 = (xs: number[], shape: number[]) => fromBytes(encode(xs, "int32"), "int32", shape, this.device);
    this.step = {
      seq: i32(l.tokenSeq, [l.tokenSeq.length]),
      pos: i32(l.tokenPos, [l.tokenPos.length]),
      slots: i32(slots, [slots.length]),
      tables: i32(tables, [l.blockTables.length, width]),
    };
  }

  /** q [1, T, Hq, D], k [1, T, Hkv, D], v [1, T, Hkv, Dv] of layer `layer` -> [1, T, Hq*Dv]. */
  attend(layer: number, q: Tensor, k: Tensor, v: Tensor, o: CausalAttentionOptions): Tensor {
    const s = this.step;
    if (!s) throw new Error("PagedKVCache: setStep must describe the batch before a forward");
    const [B, T, Hq, D] = q.shape, [, , Hkv, Dk] = k.shape;
    if (B !== 1 || Hkv !== this.shape.numKvHeads || Dk !== this.shape.headDim || v.shape[3] !== Dk) {
      throw new RangeError(`PagedKVCache: keys [${k.shape}] / values [${v.shape}] do not match the pools (batch 1, ${this.shape.numKvHeads} kv heads of ${this.shape.headDim})`);
    }
    if (o.mask) throw new Error("PagedKVCache: padding masks are not supported (the batch is ragged, not padded)");
    pagedKVWrite(k.reshape(T, Hkv, D), v.reshape(T, Hkv, D), this.kPools[layer], this.vPools[layer], s.slots);
    const out = pagedAttention(q.reshape(T, Hq, D), this.kPools[layer], this.vPools[layer], s.tables, s.seq, s.pos, {
      scale: o.scale, softcap: o.softcap, window: o.window,
    });
    return out.view(1, T, Hq * D);
  }
}
