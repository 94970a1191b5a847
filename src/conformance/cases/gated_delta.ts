/**
 * Conformance cases for Gated DeltaNet's ops: causalConv1d (with and without a carried state,
 * kernel sizes 1 and 4, a float16 weight) and the gated delta rule scan (tensor/ops.ts gatedDeltaRule): prefill-length
 * and one-token (decode) sequences, with and without an initial state, an empty sequence (the
 * state passes through), and shape errors. The reference runs the recurrence in float64; the
 * tolerance scales with the sum of absolute terms of each output (errors accumulate over Dk and L).
 */
import * as T from "../../tensor/ops.js";
import { floats, input, Rng, ulps, type Case, type Input } from "../case.js";
import { host, num, type HostTensor } from "../reference.js";

const vals = (t: HostTensor) => t.values.map(num);

function gdrCase(name: string, [B, L, H, Dk, Dv]: number[], withState: boolean, rng: Rng): Case {
  const q = rng.tensor([B, L, H, Dk]), k = rng.tensor([B, L, H, Dk]), v = rng.tensor([B, L, H, Dv]);
  const g = rng.tensor([B, L, H], -1, 0), beta = rng.tensor([B, L, H], 0, 1);
  const s0 = withState ? rng.tensor([B, H, Dk, Dv]) : null;
  const Q = vals(q), K = vals(k), V = vals(v), G = vals(g), Be = vals(beta);
  const out = new Array<number>(B * L * H * Dv).fill(0), outMag = out.slice();
  const state = s0 ? vals(s0) : new Array<number>(B * H * Dk * Dv).fill(0);
  const stateMag = state.map(Math.abs);
  for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) {
    const S = (i: number, j: number) => ((b * H + h) * Dk + i) * Dv + j;
    for (let t = 0; t < L; t++) {
      const row = (b * L + t) * H + h, decay = Math.exp(G[row]);
      for (let j = 0; j < Dv; j++) {
        let kv = 0, kvMag = 0;
        for (let i = 0; i < Dk; i++) {
          state[S(i, j)] *= decay;
          stateMag[S(i, j)] *= decay;
          kv += state[S(i, j)] * K[row * Dk + i];
          kvMag += stateMag[S(i, j)] * Math.abs(K[row * Dk + i]);
        }
        const delta = (V[row * Dv + j] - kv) * Be[row], deltaMag = (Math.abs(V[row * Dv + j]) + kvMag) * Be[row];
        let o = 0, oMag = 0;
        for (let i = 0; i < Dk; i++) {
          state[S(i, j)] += K[row * Dk + i] * delta;
          stateMag[S(i, j)] += Math.abs(K[row * Dk + i]) * deltaMag;
          o += state[S(i, j)] * Q[row * Dk + i];
          oMag += stateMag[S(i, j)] * Math.abs(Q[row * Dk + i]);
        }
        out[row * Dv + j] = o;
        outMag[row * Dv + j] = oMag;
      }
    }
  }
  const inputs: Input[] = [input(q), input(k, "transposed"), input(v), input(g), input(beta, "offset")];
  if (s0) inputs.push(input(s0));
  const n = L * Dk + 8;
  return {
    op: "gatedDeltaRule", name, inputs,
    run: ([a, bk, c, d, e, s]) => { const r = T.gatedDeltaRule(a, bk, c, d, e, s ?? null); return [r.out, r.state]; },
    expect: [floats("float32", [B, L, H, Dv], out, outMag), floats("float32", [B, H, Dk, Dv], state, stateMag)],
    tol: ulps(4 * n),
  };
}

function convCase(name: string, [B, L, C, K]: number[], withState: boolean, rng: Rng, wDtype: "float32" | "float16" = "float32"): Case {
  const x = rng.tensor([B, L, C]), w = rng.tensor([C, 1, K], -1, 1, wDtype);
  const s0 = withState ? rng.tensor([B, K - 1, C]) : null;
  const X = vals(x), W = vals(w), S0 = s0 ? vals(s0) : null;
  const P = K - 1;
  const xp = (b: number, r: number, c: number) => (r >= P ? X[(b * L + r - P) * C + c] : S0 ? S0[(b * P + r) * C + c] : 0);
  const out: number[] = [], mag: number[] = [], state: number[] = [];
  for (let b = 0; b < B; b++) for (let t = 0; t < L; t++) for (let c = 0; c < C; c++) {
    let acc = 0, m = 0;
    for (let i = 0; i < K; i++) { acc += W[c * K + i] * xp(b, t + i, c); m += Math.abs(W[c * K + i] * xp(b, t + i, c)); }
    out.push(acc);
    mag.push(m);
  }
  for (let b = 0; b < B; b++) for (let r = 0; r < P; r++) for (let c = 0; c < C; c++) state.push(xp(b, L + r, c));
  const inputs: Input[] = [input(x, "offset"), input(w)];
  if (s0) inputs.push(input(s0, "transposed"));
  return {
    op: "causalConv1d", name, inputs,
    run: ([a, wt, s]) => { const r = T.causalConv1d(a, wt, s ?? null); return [r.out, r.state]; },
    expect: [floats("float32", [B, L, C], out, mag), floats("float32", [B, P, C], state)],
    tol: ulps(2 * K + 2),
  };
}

function mismatchCase(): Case {
  const z = (shape: number[]) => input(host("float32", shape, new Array(shape.reduce((a, b) => a * b, 1)).fill(0)));
  return {
    op: "gatedDeltaRule", name: "beta of the wrong shape (RangeError)",
    inputs: [z([1, 2, 1, 2]), z([1, 2, 1, 2]), z([1, 2, 1, 3]), z([1, 2, 1]), z([1, 1, 1])],
    run: ([a, b, c, d, e]) => T.gatedDeltaRule(a, b, c, d, e, null).out,
    expect: { throws: "RangeError" }, tol: ulps(1),
  };
}

export function gatedDeltaCases(): Case[] {
  const rng = new Rng(11);
  return [
    convCase("B2 L5 C6 K4, zero state", [2, 5, 6, 4], false, rng),
    convCase("decode L1 with a carried state, float16 weight", [2, 1, 5, 4], true, rng, "float16"),
    convCase("L2 shorter than the state", [1, 2, 3, 4], true, rng),
    convCase("K1 (no state)", [1, 3, 4, 1], false, rng),
    gdrCase("prefill B2 L5 H3 Dk4 Dv6, zero state", [2, 5, 3, 4, 6], false, rng),
    gdrCase("decode step L1 with a carried state", [2, 1, 2, 8, 5], true, rng),
    gdrCase("L9 H1 Dk16 Dv16 with a carried state", [1, 9, 1, 16, 16], true, rng),
    gdrCase("empty sequence keeps the state", [1, 0, 2, 3, 4], true, rng),
    mismatchCase(),
  ];
}
