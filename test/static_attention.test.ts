/**
 * The cpu kernel for the static KV cache's attention (native static_attention.cc, taken by
 * pagedAttention when every sequence is one block): the same results as the general paged kernel
 * on the same keys and values split over two blocks per sequence, for float32, bfloat16 and
 * float16 pools, grouped query heads, a ragged batch of query tokens (prefill and decode),
 * a sliding window and soft-capping.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { DTYPE_CODE, native } from "../src/devices/cpu/native.js";
import { maxAbsDiff } from "./helpers/shared.js";
import { lcgValues } from "./helpers/lcg.js";

/** float32 values in (-1, 1) as a pool of `dtype` (bfloat16: truncated; float16: truncated to 10 mantissa bits). */
function pool(x: Float32Array, dtype: "float32" | "bfloat16" | "float16"): ArrayBufferView {
  if (dtype === "float32") return x;
  const out = new Uint16Array(x.length);
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length);
  for (let i = 0; i < x.length; i++) {
    if (dtype === "bfloat16") out[i] = u[i] >>> 16;
    else {
      // |x| < 1: a normal float16 of the top 10 mantissa bits (or zero).
      const e = ((u[i] >>> 23) & 0xff) - 127 + 15;
      out[i] = e <= 0 ? 0 : ((u[i] >>> 16) & 0x8000) | (e << 10) | ((u[i] >>> 13) & 0x3ff);
    }
  }
  return out;
}

for (const dtype of ["float32", "bfloat16", "float16"] as const) {
  test(`static-cache attention (one block per sequence) equals the paged kernel: ${dtype} pools`, () => {
    const S = 2, cap = 48, Hq = 6, Hkv = 2, D = 40;
    const k = pool(lcgValues(S * cap * Hkv * D, 1), dtype), v = pool(lcgValues(S * cap * Hkv * D, 2), dtype);
    // Tokens: sequence 0 prefill positions 0..4, sequence 1 decode at 37, sequence 0 at 47.
    const seq = new Int32Array([0, 0, 0, 0, 0, 1, 0]), pos = new Int32Array([0, 1, 2, 3, 4, 37, 47]);
    const T = seq.length, q = lcgValues(T * Hq * D, 3);
    for (const [softcap, window] of [[0, 0], [0, 9], [30, 0]]) {
      const run = (blocks: number) => {
        const bs = cap / blocks, out = new Float32Array(T * Hq * D);
        // Sequence s holds blocks s * blocks .. s * blocks + blocks - 1, in order.
        const tables = Int32Array.from({ length: S * blocks }, (_, i) => i);
        native().pagedAttention(q, k, v, tables, seq, pos, out, T, Hq, Hkv, D, D, S * blocks, bs, S, blocks, D ** -0.5, softcap, window, DTYPE_CODE[dtype]);
        return out;
      };
      const one = run(1), two = run(2);
      assert.ok(one.every(Number.isFinite));
      assert.ok(maxAbsDiff(one, two) < 1e-6, `softcap ${softcap}, window ${window}: max diff ${maxAbsDiff(one, two)}`);
    }
  });
}
