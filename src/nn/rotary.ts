/**
 * Rotary position embeddings: inverse frequencies for each rope type, and cos/sin tables for given
 * positions. Mirrors transformers' modeling_rope_utils.py (ROPE_INIT_FUNCTIONS, dynamic_rope_update)
 * and LlamaRotaryEmbedding.forward, including its float32 rounding (inv_freq, position * inv_freq and
 * cos/sin are each rounded to float32), so tables match PyTorch's bit for bit or within an ulp.
 */
import type { Device } from "../devices/device.js";
import { fromBytes } from "../tensor/creation.js";
import type { Tensor } from "../tensor/tensor.js";

const f = Math.fround;

/** The rope fields of a config, normalised from either `rope_parameters` or `rope_theta`/`rope_scaling`. */
export interface RopeParameters {
  rope_type: string;
  rope_theta: number;
  factor?: number;
  low_freq_factor?: number;
  high_freq_factor?: number;
  original_max_position_embeddings?: number;
  /** The config's max_position_embeddings ("dynamic" scales beyond it). */
  max_position_embeddings?: number;
  partial_rotary_factor?: number;
  [key: string]: unknown;
}

export interface RopeTables {
  /** Rotary dims R (even): the first R of each head's dims are rotated. */
  dim: number;
  invFreq: Float32Array;
  /** cos/sin multiplier (yarn's attention factor; 1 otherwise). */
  attentionScaling: number;
  /**
   * longrope: the inverse frequencies used instead of `invFreq` when a forward's largest position
   * + 1 exceeds `originalMaxPositions` (transformers' dynamic_rope_update for "longrope").
   */
  long?: { invFreq: Float32Array; originalMaxPositions: number };
  /** "dynamic": invFreq follows the longest sequence seen so far (updated by ropeCosSin). */
  dynamic?: DynamicNtkState;
}

/** transformers' dynamic_rope_update state: the cached length and the frequencies to reset to. */
interface DynamicNtkState {
  rope: RopeParameters;
  originalInvFreq: Float32Array;
  originalMaxSeqLen: number;
  maxSeqLenCached: number;
}

export class UnsupportedRopeError extends Error {}

/** Supported rope types (config `rope_type`). */
export const ROPE_TYPES = ["default", "linear", "llama3", "longrope", "dynamic", "yarn", "proportional"] as const;

/** 1 / base^(2i/dim) for i < dim/2 in float32, as torch computes it (the base cast to float32). */
function defaultInvFreq(base: number, dim: number): Float32Array {
  const invFreq = new Float32Array(Math.floor(dim / 2));
  for (let i = 0; i < invFreq.length; i++) invFreq[i] = f(1 / f(f(base) ** f((2 * i) / dim)));
  return invFreq;
}

/**
 * Inverse frequencies for head size `headDim` (times partial_rotary_factor) and a rope config.
 * "longrope" also reads `original_max_position_embeddings` and, when `factor` is absent,
 * `max_position_embeddings` from `rope` (transformers reads them from the config); "dynamic" reads
 * `factor` and `max_position_embeddings`; "yarn" reads `factor`, `original_max_position_embeddings`
 * and the optional `attention_factor`, `mscale`, `mscale_all_dim`, `beta_fast`, `beta_slow`, `truncate`.
 * Throws UnsupportedRopeError naming an unknown rope type.
 */
export function computeInvFreq(rope: RopeParameters, headDim: number): RopeTables {
  if (rope.rope_type === "proportional") return proportionalTables(rope, headDim);
  const dim = Math.floor(headDim * (rope.partial_rotary_factor ?? 1));
  const base = rope.rope_theta;
  const half = Math.floor(dim / 2);
  let invFreq = defaultInvFreq(base, dim);
  switch (rope.rope_type) {
    case "default":
      break;
    case "linear":
      for (let i = 0; i < half; i++) invFreq[i] = f(invFreq[i] / need(rope, "factor"));
      break;
    case "llama3": {
      const factor = need(rope, "factor"), lo = need(rope, "low_freq_factor"), hi = need(rope, "high_freq_factor");
      const old = need(rope, "original_max_position_embeddings");
      const loWavelen = old / lo, hiWavelen = old / hi;
      for (let i = 0; i < half; i++) {
        const inv = invFreq[i];
        const wavelen = (2 * Math.PI) / inv;
        if (wavelen > loWavelen) invFreq[i] = f(inv / factor);
        else if (wavelen >= hiWavelen) {
          const smooth = (old / wavelen - lo) / (hi - lo);
          invFreq[i] = f((1 - smooth) * (inv / factor) + smooth * inv);
        }
      }
      break;
    }
    case "longrope": {
      const old = need(rope, "original_max_position_embeddings");
      const factor = rope.factor ?? need(rope, "max_position_embeddings") / old;
      const attention = typeof rope.attention_factor === "number" ? rope.attention_factor
        : factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(old));
      const scaled = (key: string): Float32Array => {
        const ext = rope[key];
        if (!Array.isArray(ext) || ext.length !== half || ext.some((v) => typeof v !== "number")) {
          throw new UnsupportedRopeError(`rope type 'longrope' needs '${key}': a list of ${half} numbers`);
        }
        return invFreq.map((_, i) => f(1 / f(f(ext[i]) * f(f(base) ** f((2 * i) / dim)))));
      };
      return { dim: half * 2, invFreq: scaled("short_factor"), attentionScaling: f(attention), long: { invFreq: scaled("long_factor"), originalMaxPositions: old } };
    }
    case "dynamic": {
      const maxPos = need(rope, "max_position_embeddings");
      invFreq = dynamicNtkInvFreq(rope, dim, maxPos);
      return { dim: half * 2, invFreq, attentionScaling: 1, dynamic: { rope, originalInvFreq: invFreq, originalMaxSeqLen: maxPos, maxSeqLenCached: maxPos } };
    }
    case "yarn":
      return yarnTables(rope, dim);
    default:
      throw new UnsupportedRopeError(`unsupported rope type '${rope.rope_type}'; supported: ${ROPE_TYPES.join(", ")}`);
  }
  return { dim: half * 2, invFreq, attentionScaling: 1 };
}

/**
 * Dynamic NTK scaling (transformers' _compute_dynamic_ntk_parameters) for a sequence of `seqLen`
 * positions: beyond max_position_embeddings M the base becomes
 * base * (factor * seqLen / M - (factor - 1)) ^ (dim / (dim - 2)). At construction (seqLen = M)
 * transformers computes this in float64; called back with a longer sequence, seqLen is a tensor
 * and every step is float32, as here.
 */
function dynamicNtkInvFreq(rope: RopeParameters, dim: number, seqLen: number): Float32Array {
  const factor = need(rope, "factor"), maxPos = need(rope, "max_position_embeddings");
  const exponent = dim / (dim - 2);
  if (seqLen <= maxPos) return defaultInvFreq(rope.rope_theta * ((factor * maxPos) / maxPos - (factor - 1)) ** exponent, dim);
  const ratio = f(f(f(f(factor) * seqLen) / maxPos) - f(factor - 1));
  return defaultInvFreq(f(f(rope.rope_theta) * f(ratio ** f(exponent))), dim);
}

/**
 * transformers' dynamic_rope_update for "dynamic": a forward whose sequence (largest position + 1)
 * is longer than any before recomputes invFreq for that length; one back within
 * max_position_embeddings restores the original frequencies.
 */
function dynamicRopeUpdate(t: RopeTables, positions: number[][]): void {
  const d = t.dynamic!;
  const seqLen = maxPosition(positions) + 1;
  if (seqLen > d.maxSeqLenCached) {
    t.invFreq = dynamicNtkInvFreq(d.rope, t.dim, seqLen);
    d.maxSeqLenCached = seqLen;
  }
  if (seqLen < d.originalMaxSeqLen && d.maxSeqLenCached > d.originalMaxSeqLen) {
    t.invFreq = d.originalInvFreq;
    d.maxSeqLenCached = d.originalMaxSeqLen;
  }
}

/**
 * YaRN (transformers' _compute_yarn_parameters): each frequency is blended between the
 * interpolated (divided by `factor`) and the extrapolated one by a linear ramp over the dims whose
 * wavelengths lie between beta_fast and beta_slow rotations of original_max_position_embeddings;
 * cos/sin are scaled by attention_factor (else from mscale / mscale_all_dim, else 0.1 ln(factor) + 1).
 */
function yarnTables(rope: RopeParameters, dim: number): RopeTables {
  const base = rope.rope_theta, factor = need(rope, "factor");
  const original = need(rope, "original_max_position_embeddings");
  const getMscale = (scale: number, mscale = 1) => (scale <= 1 ? 1 : 0.1 * mscale * Math.log(scale) + 1);
  let attentionScaling = rope.attention_factor as number | null | undefined;
  if (typeof attentionScaling !== "number") {
    const mscale = rope.mscale as number | undefined, mscaleAllDim = rope.mscale_all_dim as number | undefined;
    attentionScaling = mscale && mscaleAllDim ? getMscale(factor, mscale) / getMscale(factor, mscaleAllDim) : getMscale(factor);
  }
  const betaFast = (rope.beta_fast as number | undefined) || 32, betaSlow = (rope.beta_slow as number | undefined) || 1;
  const correctionDim = (rotations: number) => (dim * Math.log(original / (rotations * 2 * Math.PI))) / (2 * Math.log(base));
  let low = correctionDim(betaFast), high = correctionDim(betaSlow);
  if (rope.truncate ?? true) {
    low = Math.floor(low);
    high = Math.ceil(high);
  }
  low = Math.max(low, 0);
  high = Math.min(high, dim - 1);
  if (low === high) high += 0.001; // transformers' guard against a zero-width ramp
  const half = Math.floor(dim / 2);
  const invFreq = new Float32Array(half);
  for (let i = 0; i < half; i++) {
    const posFreq = f(f(base) ** f((2 * i) / dim));
    const extrapolation = f(1 / posFreq), interpolation = f(1 / f(f(factor) * posFreq));
    const ramp = Math.min(1, Math.max(0, f(f(i - f(low)) / f(high - low))));
    const extrapolationFactor = f(1 - ramp);
    invFreq[i] = f(f(interpolation * f(1 - extrapolationFactor)) + f(extrapolation * extrapolationFactor));
  }
  return { dim: half * 2, invFreq, attentionScaling };
}

/**
 * Proportional rope (transformers' _compute_proportional_rope_parameters, Gemma 4's full-attention
 * layers): the tables span the whole head (R = headDim, pairs (i, i + headDim/2)), but only the
 * first partial_rotary_factor * headDim / 2 frequencies base^(-2i/headDim) are nonzero; the others
 * are 0 (cos 1, sin 0: those dims pass through). All are divided by `factor` (default 1).
 */
function proportionalTables(rope: RopeParameters, headDim: number): RopeTables {
  const angles = Math.floor(((rope.partial_rotary_factor ?? 1) * headDim) / 2);
  const factor = rope.factor ?? 1;
  const invFreq = new Float32Array(Math.floor(headDim / 2));
  for (let i = 0; i < angles; i++) invFreq[i] = f(f(1 / f(f(rope.rope_theta) ** f((2 * i) / headDim))) / factor);
  return { dim: invFreq.length * 2, invFreq, attentionScaling: 1 };
}

function need(rope: RopeParameters, key: string): number {
  const v = rope[key];
  if (typeof v !== "number") throw new UnsupportedRopeError(`rope type '${rope.rope_type}' needs a numeric '${key}' in its config`);
  return v;
}

/**
 * cos/sin tables [B, L, R] float32 for integer positions [B][L] (as LlamaRotaryEmbedding.forward:
 * emb = cat(freqs, freqs), cos = cos(emb) * attentionScaling). For "dynamic" rope it first updates
 * `t` for the positions' length, as transformers' dynamic_rope_update does.
 */
export function ropeCosSin(t: RopeTables, positions: number[][], device: Device): { cos: Tensor; sin: Tensor } {
  const B = positions.length, L = positions[0]?.length ?? 0, R = t.dim, half = R / 2;
  if (t.dynamic && B * L > 0) dynamicRopeUpdate(t, positions);
  const scaling = f(t.attentionScaling);
  const invFreq = t.long && maxPosition(positions) + 1 > t.long.originalMaxPositions ? t.long.invFreq : t.invFreq;
  const cos = new Float32Array(B * L * R), sin = new Float32Array(B * L * R);
  for (let b = 0; b < B; b++) {
    for (let l = 0; l < L; l++) {
      const pos = f(positions[b][l]);
      const row = (b * L + l) * R;
      for (let i = 0; i < half; i++) {
        const angle = f(pos * invFreq[i]);
        const c = f(f(Math.cos(angle)) * scaling), s = f(f(Math.sin(angle)) * scaling);
        cos[row + i] = cos[row + i + half] = c;
        sin[row + i] = sin[row + i + half] = s;
      }
    }
  }
  const bytes = (a: Float32Array) => new Uint8Array(a.buffer);
  return {
    cos: fromBytes(bytes(cos), "float32", [B, L, R], device),
    sin: fromBytes(bytes(sin), "float32", [B, L, R], device),
  };
}

function maxPosition(positions: number[][]): number {
  let m = -Infinity;
  for (const row of positions) for (const p of row) m = Math.max(m, p);
  return m;
}
