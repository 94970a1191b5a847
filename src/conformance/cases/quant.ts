/**
 * Conformance cases of quantized-weight ops: dequantizeMxfp4 (MXFP4 blocks and scales to float32),
 * against a float64 decoding of the same bytes (e2m1 code value × 2^(scale − 127), low nibble first).
 */
import * as T from "../../tensor/ops.js";
import type { Tensor } from "../../tensor/tensor.js";
import { exact, input, Rng, type Case } from "../case.js";
import { EXACT, host } from "../reference.js";

const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];

/** Packed bytes as little-endian int32 words (what the op takes). */
export function words(bytes: number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i += 4) out.push((bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)) >> 0);
  return out;
}

function mxfp4Case(name: string, lead: number[], nb: number, rng: Rng, view: "contiguous" | "offset" = "contiguous"): Case {
  const R = lead.reduce((a, b) => a * b, 1), S = Math.ceil(nb / 4);
  const blockBytes = Array.from({ length: R * nb * 16 }, () => rng.int(0, 256));
  // Exponents 2^-27 … 2^26 around the bias (results stay normal float32 numbers).
  const scaleBytes = Array.from({ length: R * nb }, (_, i) => (i === 0 ? 100 : i === 1 ? 153 : rng.int(117, 138)));
  const padded: number[] = [];
  for (let r = 0; r < R; r++) padded.push(...scaleBytes.slice(r * nb, (r + 1) * nb), ...Array(S * 4 - nb).fill(0));
  const values: number[] = [];
  for (let r = 0; r < R; r++) for (let g = 0; g < nb; g++) {
    const scale = 2 ** (scaleBytes[r * nb + g] - 127);
    for (let j = 0; j < 16; j++) {
      const b = blockBytes[(r * nb + g) * 16 + j];
      values.push(E2M1[b & 15] * scale, E2M1[b >> 4] * scale);
    }
  }
  return {
    op: "dequantizeMxfp4", name,
    inputs: [input(host("int32", [...lead, nb, 4], words(blockBytes)), view), input(host("int32", [...lead, S], words(padded)), view)],
    run: ([b, s]: Tensor[]) => T.dequantizeMxfp4(b, s),
    expect: [exact(host("float32", [...lead, nb * 32], values))],
    tol: EXACT,
  };
}

export function quantCases(): Case[] {
  const rng = new Rng(11);
  return [
    mxfp4Case("[3 rows, 2 blocks]: scales padded to one word", [3], 2, rng),
    mxfp4Case("[2, 5 rows, 6 blocks] at element offsets", [2, 5], 6, rng, "offset"),
    mxfp4Case("[70 rows, 4 blocks] (several workgroups)", [70], 4, rng),
  ];
}
