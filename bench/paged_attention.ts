/**
 * The cpu paged-attention kernel alone at a serving decode step's shape (Qwen3-0.6B: 16 query
 * heads, 8 kv heads of 128, 28 layers; block size 16), float32 vs bfloat16 pools, best of 6:
 *   node dist/bench/paged_attention.js [CONTEXT=192] [SEQS=32]
 * Prints one JSON line: ms per decode step (every layer's attention for SEQS query tokens, each
 * seeing CONTEXT keys) per pool dtype.
 */
import { full, tensor } from "../src/tensor/creation.js";
import { pagedAttention } from "../src/tensor/paged_attention.js";
import "../src/devices/builtin.js";

const ctx = Number(process.argv[2] ?? 192), S = Number(process.argv[3] ?? 32);
const [Hq, Hkv, D, bs, layers] = [16, 8, 128, 16, 28];
const w = Math.ceil(ctx / bs), nb = S * w;
const i32 = (xs: number[], shape = [xs.length]) => tensor(xs, { dtype: "int32", shape });
const tables = i32(Array.from({ length: S * w }, (_, i) => i), [S, w]);
const seq = i32(Array.from({ length: S }, (_, i) => i)), pos = i32(Array.from({ length: S }, () => ctx - 1));
const q = full([S, Hq, D], 0.1);
const dtypes = ["float32", "bfloat16"] as const;
const pools = Object.fromEntries(dtypes.map((dt) => [dt, Array.from({ length: layers }, () => [full([nb, bs, Hkv, D], 0.01, { dtype: dt }), full([nb, bs, Hkv, D], 0.02, { dtype: dt })])]));
const best: Record<string, number> = { float32: Infinity, bfloat16: Infinity };
for (let r = 0; r < 6; r++) {
  for (const dt of dtypes) {
    const t0 = performance.now();
    for (const [kp, vp] of pools[dt]) pagedAttention(q, kp, vp, tables, seq, pos);
    best[dt] = Math.min(best[dt], performance.now() - t0);
  }
}
console.log(JSON.stringify({ seqs: S, context: ctx, layers, msPerDecodeStep: Object.fromEntries(dtypes.map((dt) => [dt, Math.round(best[dt])])) }));
