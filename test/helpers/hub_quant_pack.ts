/**
 * The packer of test/data/quantized_hub/make_reference.py, in TypeScript, so that the tests build
 * the GPTQ / AWQ / FP8 checkpoints themselves (no Python in CI, no weights committed): the same
 * round-to-nearest quantizer with float32 arithmetic, float16 / float8_e4m3fn rounding to nearest
 * even, and the tools' packing. The tests check every packed tensor's SHA-256 against the one the
 * Python packer recorded in reference.json before comparing logits.
 */
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { readSafetensors } from "../../src/hub/safetensors.js";
import { writeSafetensors } from "./mock_hub.js";

/** quantization_config of one variant, as reference.json holds it. */
export type QuantConfig = { quant_method: "gptq" | "awq" | "fp8"; bits?: number; group_size?: number; desc_act?: boolean;
  sym?: boolean; weight_block_size?: [number, number] };

interface Packed { name: string; dtype: string; shape: number[]; bytes: Uint8Array }

const PROJ = new Set(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]);
const AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7];
const f = Math.fround;

/** Round half to even (torch.round). */
function rne(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** float32 -> float16 bits, round to nearest even. */
function f16Bits(x: number): number {
  const u = new Uint32Array(new Float32Array([x]).buffer)[0];
  const sign = (u >>> 16) & 0x8000, e = (u >>> 23) & 0xff, m = u & 0x7fffff;
  if (e === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  const exp = e - 112;
  if (exp >= 0x1f) return sign | 0x7c00;
  const round = (v: number, shift: number) => {
    const q = Math.floor(v / 2 ** shift), rem = v - q * 2 ** shift, mid = 2 ** (shift - 1);
    return rem > mid || (rem === mid && q % 2 === 1) ? q + 1 : q;
  };
  if (exp <= 0) return exp < -10 ? sign : sign | round(m | 0x800000, 14 - exp);
  return sign | round((exp << 23) | m, 13);
}

function f16Value(h: number): number {
  const e = (h >> 10) & 31, m = h & 1023, s = h & 0x8000 ? -1 : 1;
  return s * (e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15));
}

/** Non-negative finite float8_e4m3fn values by code 0..126. */
const E4M3 = Array.from({ length: 127 }, (_, c) => ((c >> 3) === 0 ? (c & 7) * 2 ** -9 : (1 + (c & 7) / 8) * 2 ** ((c >> 3) - 7)));

/** float32 x with |x| <= 448 -> float8_e4m3fn byte, round to nearest even. */
function e4m3Byte(x: number): number {
  const a = Math.abs(x), sign = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  let lo = 0;
  while (lo < 126 && E4M3[lo + 1] <= a) lo++;
  if (lo === 126 || E4M3[lo] === a) return sign | lo;
  const dl = a - E4M3[lo], dh = E4M3[lo + 1] - a;
  return sign | (dl < dh || (dl === dh && lo % 2 === 0) ? lo : lo + 1);
}

function int32Bytes(v: number[]): Uint8Array { return new Uint8Array(Int32Array.from(v).buffer); }

/** Pack codes [R, C] (row-major) into int32 words along `dim` (0: rows, 1: columns), low bits first. */
function pack(codes: number[], R: number, C: number, bits: number, dim: 0 | 1, order?: number[]): { words: number[]; shape: number[] } {
  const per = 32 / bits, mask = 2 ** bits - 1;
  const shape = dim === 0 ? [R / per, C] : [R, C / per];
  const words: number[] = new Array(shape[0] * shape[1]).fill(0);
  for (let r = 0; r < shape[0]; r++) for (let c = 0; c < shape[1]; c++) {
    let w = 0;
    for (let i = 0; i < per; i++) {
      const j = order ? order[i] : i;
      const code = dim === 0 ? codes[(r * per + j) * C + c] : codes[r * C + c * per + j];
      w += (code & mask) * 2 ** (bits * i);
    }
    words[r * shape[1] + c] = w | 0;
  }
  return { words, shape };
}

function actOrder(K: number): number[] {
  const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);
  const p = [37, 41, 43, 47].find((q) => gcd(q, K) === 1)!;
  return Array.from({ length: K }, (_, i) => (i * p) % K);
}

function fits(cfg: QuantConfig, N: number, K: number): boolean {
  if (cfg.quant_method === "fp8") return K % 4 === 0;
  const per = 32 / cfg.bits!;
  return K % cfg.group_size! === 0 && K % per === 0 && N % per === 0;
}

/** GPTQ / AWQ tensors of W [N, K] (float32 values, row-major). */
function packInt(base: string, W: Float32Array, N: number, K: number, cfg: QuantConfig): Packed[] {
  const bits = cfg.bits!, g = cfg.group_size!, maxq = 2 ** bits - 1, G = K / g;
  const order = cfg.desc_act ? actOrder(K) : Array.from({ length: K }, (_, k) => k);
  const gIdx = new Array<number>(K);
  order.forEach((k, i) => { gIdx[k] = Math.floor(i / g); });
  const scaleBits = new Array<number>(G * N), scale = new Array<number>(G * N), zeros = new Array<number>(G * N);
  for (let gi = 0; gi < G; gi++) for (let n = 0; n < N; n++) {
    let mn = Infinity, mx = -Infinity;
    for (let k = 0; k < K; k++) if (gIdx[k] === gi) { mn = Math.min(mn, W[n * K + k]); mx = Math.max(mx, W[n * K + k]); }
    mn = Math.min(mn, 0); mx = Math.max(mx, 0);
    if (cfg.sym) { mx = Math.max(-mn, mx); if (mn < 0) mn = -mx; }
    if (mn === 0 && mx === 0) { mn = -1; mx = 1; }
    const h = f16Bits(f(f(mx - mn) / maxq)), s = f16Value(h);
    scaleBits[gi * N + n] = h; scale[gi * N + n] = s;
    zeros[gi * N + n] = cfg.sym ? (maxq + 1) / 2 : Math.min(maxq, Math.max(0, rne(f(-mn / s))));
  }
  const q = new Array<number>(K * N);  // [K, N]
  for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) {
    const i = gIdx[k] * N + n;
    q[k * N + n] = Math.min(maxq, Math.max(0, rne(f(W[n * K + k] / scale[i])) + zeros[i]));
  }
  const scales = { name: `${base}.scales`, dtype: "F16", shape: [G, N], bytes: new Uint8Array(Uint16Array.from(scaleBits).buffer) };
  if (cfg.quant_method === "gptq") {
    const qw = pack(q, K, N, bits, 0), qz = pack(zeros.map((z) => z - 1), G, N, bits, 1);
    return [{ name: `${base}.qweight`, dtype: "I32", shape: qw.shape, bytes: int32Bytes(qw.words) },
      { name: `${base}.qzeros`, dtype: "I32", shape: qz.shape, bytes: int32Bytes(qz.words) }, scales,
      { name: `${base}.g_idx`, dtype: "I32", shape: [K], bytes: int32Bytes(gIdx) }];
  }
  const qw = pack(q, K, N, bits, 1, AWQ_ORDER), qz = pack(zeros, G, N, bits, 1, AWQ_ORDER);
  return [{ name: `${base}.qweight`, dtype: "I32", shape: qw.shape, bytes: int32Bytes(qw.words) },
    { name: `${base}.qzeros`, dtype: "I32", shape: qz.shape, bytes: int32Bytes(qz.words) }, scales];
}

/** FP8 tensors of W [N, K]: e4m3 bytes and float32 weight_scale_inv per block. */
function packFp8(base: string, W: Float32Array, N: number, K: number, cfg: QuantConfig): Packed[] {
  const [bn, bk] = cfg.weight_block_size!, SN = Math.ceil(N / bn), SK = Math.ceil(K / bk);
  const S = new Float32Array(SN * SK), q = new Uint8Array(N * K);
  for (let i = 0; i < SN; i++) for (let j = 0; j < SK; j++) {
    let amax = 0;
    for (let n = i * bn; n < Math.min(N, (i + 1) * bn); n++) for (let k = j * bk; k < Math.min(K, (j + 1) * bk); k++) amax = Math.max(amax, Math.abs(W[n * K + k]));
    const s = amax > 0 ? f(amax / 448) : 1;
    S[i * SK + j] = s;
    for (let n = i * bn; n < Math.min(N, (i + 1) * bn); n++) for (let k = j * bk; k < Math.min(K, (j + 1) * bk); k++) {
      q[n * K + k] = e4m3Byte(Math.min(448, Math.max(-448, f(W[n * K + k] / s))));
    }
  }
  return [{ name: `${base}.weight`, dtype: "F8_E4M3", shape: [N, K], bytes: q },
    { name: `${base}.weight_scale_inv`, dtype: "F32", shape: [SN, SK], bytes: new Uint8Array(S.buffer) }];
}

const STORED: Record<string, string> = { float32: "F32", float16: "F16", bfloat16: "BF16", int32: "I32", int64: "I64" };

/**
 * Write the `cfg` checkpoint of the float model in `src` to `out` (config.json with
 * quantization_config, model.safetensors, tokenizer and generation files copied). Returns the
 * SHA-256 of every packed tensor by name. The float weights must be float32 or bfloat16.
 */
export function writeQuantizedCheckpoint(src: string, out: string, cfg: QuantConfig): Record<string, string> {
  mkdirSync(out, { recursive: true });
  const tensors: Packed[] = [], hashes: Record<string, string> = {};
  for (const [name, t] of readSafetensors(path.join(src, "model.safetensors"))) {
    const parts = name.split(".");
    if (name.endsWith(".weight") && PROJ.has(parts[parts.length - 2]) && fits(cfg, t.shape[0], t.shape[1])) {
      if (t.dtype !== "float32" && t.dtype !== "bfloat16") throw new Error(`${name}: the packer reads float32 or bfloat16 weights, got ${t.dtype}`);
      // bfloat16 widens exactly: its bits are the high half of a float32's.
      const W = t.dtype === "float32" ? new Float32Array(t.bytes.slice().buffer)
        : new Float32Array(Uint32Array.from(new Uint16Array(t.bytes.slice().buffer), (h) => h << 16).buffer);
      const [N, K] = t.shape, base = name.slice(0, -".weight".length);
      const packed = cfg.quant_method === "fp8" ? packFp8(base, W, N, K, cfg) : packInt(base, W, N, K, cfg);
      for (const p of packed) hashes[p.name] = createHash("sha256").update(p.bytes).digest("hex");
      tensors.push(...packed);
    } else {
      tensors.push({ name, dtype: STORED[t.dtype], shape: t.shape, bytes: t.bytes });
    }
  }
  writeSafetensors(path.join(out, "model.safetensors"), tensors, { format: "pt" });
  const config = JSON.parse(readFileSync(path.join(src, "config.json"), "utf8"));
  writeFileSync(path.join(out, "config.json"), JSON.stringify({ ...config, quantization_config: cfg }, null, 2));
  for (const f of readdirSync(src)) if (f.startsWith("tokenizer") || f === "generation_config.json") copyFileSync(path.join(src, f), path.join(out, f));
  return hashes;
}
