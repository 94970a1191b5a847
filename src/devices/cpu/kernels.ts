/**
 * The cpu device's kernels: thin adapters from the kernel signatures (devices/kernels.ts) to the
 * native addon's ABI (./native.ts). No math happens here. The addon is loaded on first use, so a
 * missing build is reported when a cpu op runs, with how to fix it.
 */
import type { FusedStep, KernelSignatures, LinearGroupNorm, QuantizedWeight } from "../kernels.js";
import { byteOffset, numel, type TensorView } from "../view.js";
import { BINARY, DTYPE_CODE, REDUCE, UNARY, native } from "./native.js";

/** Bytes of `t` starting at its element [0, …, 0] (the storage's own array when that is its start: no view made). */
function buf(t: TensorView): Uint8Array {
  const bytes = t.storage.handle as Uint8Array, offset = byteOffset(t);
  return offset === 0 ? bytes : bytes.subarray(offset);
}
const code = (t: TensorView) => DTYPE_CODE[t.dtype];
const strides = (t: TensorView) => t.strides as number[];
const shape = (t: TensorView) => t.shape as number[];
const rowsOf = (t: TensorView) => numel(t) / t.shape[t.shape.length - 1];
const last = (t: TensorView) => t.shape[t.shape.length - 1];

/** gatherLinear on cpu: one addon call sorts rows by expert, runs every expert's GEMM and scatters. */
const gatherLinear: KernelSignatures["gatherLinear"] = (x, w, idx, out) =>
  native().gatherLinear(buf(x), w.map(buf), code(w[0]), buf(idx), buf(out), x.shape[0], out.shape[out.shape.length - 1], x.shape[1]);

/** moeExperts on cpu: one addon call (sort by expert, gate|up GEMM, silu * up, down GEMM, weighted sum). */
const moeExperts: KernelSignatures["moeExperts"] = (x, gateUp, down, weights, ids, out) =>
  native().moeExperts(buf(x), buf(gateUp), buf(down), code(gateUp), buf(weights), buf(ids), buf(out),
    x.shape[0], ids.shape[1], gateUp.shape[0], x.shape[1], down.shape[2]);

/** Most inputs of a fused chain (the addon's kMaxFusedInputs). */
const MAX_FUSED_INPUTS = 6;
/** Encoded programs of fused chains, by identity (a compiled graph passes the same steps every call). */
const programs = new WeakMap<readonly FusedStep[], Int32Array>();

/** The addon's encoding of a fused chain (6 ints per step, see native.ts's fusedElementwise). */
function program(steps: readonly FusedStep[]): Int32Array {
  let prog = programs.get(steps);
  if (!prog) {
    prog = new Int32Array(steps.length * 6);
    steps.forEach((s, i) => {
      const unary = s.op in UNARY;
      const ops = s.args.flatMap((a) => ("input" in a ? [0, a.input] : [1, a.step]));
      prog!.set([unary ? 0 : 1, unary ? UNARY[s.op as keyof typeof UNARY] : BINARY[s.op as keyof typeof BINARY], ...ops, ...(unary ? [0, 0] : [])], i * 6);
    });
    programs.set(steps, prog);
  }
  return prog;
}

const fusedElementwise: KernelSignatures["fusedElementwise"] = (steps, inputs, out) => {
  if (inputs.length > MAX_FUSED_INPUTS) throw new RangeError(`fusedElementwise: ${inputs.length} inputs exceed ${MAX_FUSED_INPUTS}`);
  const prog = program(steps);
  const args: (Uint8Array | number[] | null)[] = [];
  for (let k = 0; k < MAX_FUSED_INPUTS; k++) args.push(k < inputs.length ? buf(inputs[k]) : null, k < inputs.length ? strides(inputs[k]) : []);
  native().fusedElementwise(prog, steps.length, inputs.length, ...args, buf(out), shape(out));
};

/** The weight arguments of the fused linear exports: a float weight (its bytes and dtype code) or a
 * block-quantized one (its codes, scales and bits). */
function weightArgs(w: TensorView | QuantizedWeight): { data: Uint8Array; dtype: number; scales: Uint8Array | null; bits: number; N: number } {
  return "bits" in w ? { data: buf(w.q), dtype: 0, scales: buf(w.scales), bits: w.bits, N: w.q.shape[0] }
    : { data: buf(w), dtype: code(w), scales: null, bits: 0, N: w.shape[0] };
}

/** linearGroup on cpu (float or block-quantized weights): one addon call (one thread-pool job for
 * few rows; the norm and the epilogue inside). */
function linearGroup(x: TensorView, norm: LinearGroupNorm | null, ws: (TensorView | QuantizedWeight)[], outs: TensorView[], epilogue: readonly FusedStep[] | null = null): void {
  const [a0, a1, a2] = [weightArgs(ws[0]), ws[1] ? weightArgs(ws[1]) : null, ws[2] ? weightArgs(ws[2]) : null];
  // Output g > 0 (none with an epilogue: the chain writes out[0]).
  const out = (g: number) => (g < outs.length && !epilogue ? buf(outs[g]) : null);
  native().linearGroup(buf(x), x.shape[0], x.shape[1], norm ? buf(norm.weight) : null, norm ? code(norm.weight) : 0, norm?.eps ?? 0, norm?.offset ?? 0, ws.length,
    a0.data, a0.dtype, a0.N, buf(outs[0]), a1?.data ?? null, a1?.dtype ?? 0, a1?.N ?? 0, out(1), a2?.data ?? null, a2?.dtype ?? 0, a2?.N ?? 0, out(2),
    epilogue ? program(epilogue) : null, epilogue?.length ?? 0, a0.scales, a1?.scales ?? null, a2?.scales ?? null, a0.bits);
}

/** linearAdd on cpu (a float or block-quantized weight): one addon call. */
function linearAdd(x: TensorView, w: TensorView | QuantizedWeight, bias: TensorView | null, residual: TensorView, out: TensorView): void {
  const a = weightArgs(w);
  native().linearAdd(buf(x), a.data, a.dtype, bias ? buf(bias) : null, bias ? code(bias) : 0, buf(residual), buf(out), x.shape[0], a.N, x.shape[1], a.scales, a.bits);
}

/** rotaryKVWrite on cpu: one addon call (the eager rotary and pagedKVWrite kernels, the rotated k never stored). */
const rotaryKVWrite: KernelSignatures["rotaryKVWrite"] = (q, qOut, k, v, cos, sin, kc, vc, slots, rows = null) => {
  const [B, L, Hkv, D] = k.shape, [N, bs] = kc.shape;
  native().rotaryKVWrite(q ? buf(q) : null, qOut ? buf(qOut) : null, buf(k), buf(v), buf(cos), buf(sin), buf(kc), buf(vc), buf(slots),
    rows ? buf(rows) : null, rows ? code(rows) : 0, B, L, q ? q.shape[2] : 0, Hkv, D, vc.shape[3], last(cos), rows ? cos.shape[0] : 0, N, bs, code(kc),
    null, null, 0, 0, 0);
};

/** normRotaryKVWrite on cpu: the same addon call with the q/k norm weights (normalized by the eager rmsNorm kernel first). */
const normRotaryKVWrite: KernelSignatures["normRotaryKVWrite"] = (q, qOut, k, v, cos, sin, kc, vc, slots, norm, rows = null) => {
  const [B, L, Hkv, D] = k.shape, [N, bs] = kc.shape;
  native().rotaryKVWrite(buf(q), buf(qOut), buf(k), buf(v), buf(cos), buf(sin), buf(kc), buf(vc), buf(slots),
    rows ? buf(rows) : null, rows ? code(rows) : 0, B, L, q.shape[2], Hkv, D, vc.shape[3], last(cos), rows ? cos.shape[0] : 0, N, bs, code(kc),
    buf(norm.q), buf(norm.k), code(norm.q), norm.eps, norm.offset);
};

/** decodeAttention on cpu: one addon call (linear_group, rotary_kv_write, static_attention and linear_add in turn). */
const decodeAttention: KernelSignatures["decodeAttention"] = (x, norm, qkv, q, k, v, qkNorm, cos, sin, kc, vc, at, p, o, bias, residual, out) => {
  const [wq, wk, wv] = qkv.map(weightArgs), wo = weightArgs(o);
  const [B, capacity, Hkv, D] = kc.shape;
  native().decodeAttention(buf(x), B, x.shape[1], norm ? buf(norm.weight) : null, norm ? code(norm.weight) : 0, norm?.eps ?? 0, norm?.offset ?? 0,
    wq.data, wq.dtype, wk.data, wk.dtype, wv.data, wv.dtype, wq.scales, wk.scales, wv.scales, wq.bits, buf(q), buf(k), buf(v),
    qkNorm ? buf(qkNorm.q) : null, qkNorm ? buf(qkNorm.k) : null, qkNorm ? code(qkNorm.q) : 0, qkNorm?.eps ?? 0, qkNorm?.offset ?? 0,
    buf(cos), buf(sin), last(cos), buf(kc), buf(vc), code(kc), capacity, at, numel(q) / (B * D), Hkv, D, vc.shape[3], p.scale, p.softcap,
    wo.data, wo.dtype, wo.scales, wo.bits, bias ? buf(bias) : null, bias ? code(bias) : 0, buf(residual), buf(out), wo.N);
};

/** linearArgmax on cpu (a float or block-quantized head): one addon call (one pool job for few rows:
 * the norm, the LM head and the per-task argmax). */
function linearArgmax(x: TensorView, norm: LinearGroupNorm | null, w: TensorView | QuantizedWeight, out: TensorView): void {
  const a = weightArgs(w);
  native().linearArgmax(buf(x), x.shape[0], x.shape[1], norm ? buf(norm.weight) : null, norm ? code(norm.weight) : 0, norm?.eps ?? 0, norm?.offset ?? 0,
    a.data, a.dtype, a.N, buf(out), a.scales, a.bits);
}

export function cpuKernels(): Partial<KernelSignatures> {
  return {
    copy: (src, dst) => native().copy(buf(src), code(src), strides(src), buf(dst), code(dst), strides(dst), shape(src)),
    unary: (op, x, out) => native().unary(UNARY[op], buf(x), buf(out), numel(x)),
    binary: (op, a, b, out) => native().binary(BINARY[op], code(a), buf(a), strides(a), buf(b), strides(b), buf(out), shape(out)),
    where: (c, a, b, out) => native().where(buf(c), strides(c), buf(a), strides(a), buf(b), strides(b), code(out), buf(out), shape(out)),
    reduce: (op, x, out) => native().reduce(REDUCE[op], buf(x), code(x), buf(out), numel(out), last(x)),
    cumsum: (x, out) => native().cumsum(buf(x), code(x), buf(out), rowsOf(x), last(x)),
    softmax: (x, out, log) => native().softmax(buf(x), buf(out), rowsOf(x), last(x), log ? 1 : 0),
    linear: (x, w, bias, out) =>
      native().linear(buf(x), buf(w), code(w), bias ? buf(bias) : null, bias ? code(bias) : 0, buf(out), x.shape[0], w.shape[0], w.shape[1]),
    linearAdd,
    linearAddQuantized: linearAdd,
    gatherLinear,
    moeExperts,
    quantizeBlocks: (w, bits, q, scales) =>
      native().quantizeBlocks(buf(w), code(w), bits, buf(q), buf(scales), w.shape[0], w.shape[1]),
    linearQuantized: (x, q, scales, bits, bias, out) =>
      native().linearQuantized(buf(x), buf(q), buf(scales), bits, bias ? buf(bias) : null, bias ? code(bias) : 0, buf(out), x.shape[0], q.shape[0], x.shape[1]),
    linearQuantizedGroup: (x, qs, scales, biases, bits, outs) =>
      native().linearQuantizedGroup(buf(x), bits, x.shape[0], x.shape[1], ...qs.flatMap((q, i) => {
        const b = biases[i];
        return [buf(q), buf(scales[i]), b ? buf(b) : null, b ? code(b) : 0, buf(outs[i]), q.shape[0]];
      }), ...(qs.length < 3 ? [null, null, null, 0, null, 0] : [])),
    linearPackedInt: (x, qweight, qzeros, scales, gIdx, bits, awq, zeroOffset, bias, out) =>
      native().linearPackedInt(buf(x), buf(qweight), buf(qzeros), buf(scales), buf(gIdx), bits, awq ? 1 : 0, zeroOffset,
        bias ? buf(bias) : null, bias ? code(bias) : 0, buf(out), x.shape[0], scales.shape[1], x.shape[1], scales.shape[0]),
    linearFp8Block: (x, weight, scaleInv, blockN, blockK, bias, out) =>
      native().linearFp8Block(buf(x), buf(weight), buf(scaleInv), blockN, blockK, bias ? buf(bias) : null, bias ? code(bias) : 0,
        buf(out), x.shape[0], weight.shape[0], x.shape[1]),
    dequantMxfp4: (blocks, scales, out) =>
      native().dequantMxfp4(buf(blocks), buf(scales), scales.shape[1] * 4, buf(out), blocks.shape[0], blocks.shape[1]),
    matmul: (a, b, out) => native().matmul(buf(a), strides(a), buf(b), strides(b), buf(out), a.shape[0], a.shape[1], b.shape[2], a.shape[2]),
    sdpa: (q, k, v, mask, out, p) => {
      const [B, Hq, Lq, D] = q.shape, [, Hkv, Lk] = k.shape, Dv = v.shape[3];
      native().sdpa(buf(q), strides(q), buf(k), strides(k), buf(v), strides(v), buf(out),
        mask ? buf(mask) : null, mask ? strides(mask).slice(0, 3) : [0, 0, 0],
        B, Hq, Hkv, Lq, Lk, D, Dv, p.scale, p.softcap, p.causalOffset, p.window, code(k), p.sinks ? buf(p.sinks) : null);
    },
    pagedKVWrite: (k, v, kc, vc, slots) => {
      const [N, bs, Hkv, D] = kc.shape;
      native().pagedKVWrite(buf(k), buf(v), buf(kc), buf(vc), buf(slots), slots.shape[0], N, bs, Hkv, D, vc.shape[3], code(kc));
    },
    pagedAttention: (q, kc, vc, tables, seq, pos, out, p) => {
      const [T, Hq, D] = q.shape, [N, bs, Hkv] = kc.shape;
      native().pagedAttention(buf(q), buf(kc), buf(vc), buf(tables), buf(seq), buf(pos), buf(out),
        T, Hq, Hkv, D, vc.shape[3], N, bs, tables.shape[0], tables.shape[1], p.scale, p.softcap, p.window, code(kc));
    },
    rmsNorm: (x, w, out, eps, offset) => native().rmsNorm(buf(x), buf(w), code(w), buf(out), rowsOf(x), last(x), eps, offset),
    causalConv1d: (x, w, state, out, stateOut) => {
      const [B, L, C] = x.shape;
      native().causalConv1d(buf(x), buf(w), state ? buf(state) : null, buf(out), buf(stateOut), B, L, C, w.shape[1]);
    },
    gatedDeltaRule: (q, k, v, g, beta, state, out, stateOut) => {
      const [B, L, H, Dk] = q.shape;
      native().gatedDeltaRule(buf(q), buf(k), buf(v), buf(g), buf(beta), state ? buf(state) : null, buf(out), buf(stateOut), B, L, H, Dk, v.shape[3]);
    },
    layerNorm: (x, w, b, out, eps) =>
      native().layerNorm(buf(x), w ? buf(w) : null, w ? code(w) : 0, b ? buf(b) : null, b ? code(b) : 0, buf(out), rowsOf(x), last(x), eps),
    conv2d: (x, w, bias, out, p) => {
      const [N, C, H, W] = x.shape, [O, , kh, kw] = w.shape;
      native().conv2d(buf(x), buf(w), code(w), bias ? buf(bias) : null, bias ? code(bias) : 0, buf(out), N, C, H, W, O, kh, kw,
        p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups);
    },
    groupNorm: (x, w, b, out, groups, eps) =>
      native().groupNorm(buf(x), w ? buf(w) : null, w ? code(w) : 0, b ? buf(b) : null, b ? code(b) : 0, buf(out), x.shape[0], x.shape[1], x.shape[2], groups, eps),
    upsampleNearest2d: (x, out, scaleH, scaleW) =>
      native().upsampleNearest2d(buf(x), buf(out), x.shape[0], x.shape[1], x.shape[2], out.shape[1], out.shape[2], scaleH, scaleW),
    rotary: (x, cos, sin, out) => {
      const [B, L, H, D] = x.shape;
      native().rotary(buf(x), buf(cos), buf(sin), buf(out), B, L, H, D, cos.shape[2]);
    },
    embedding: (table, ids, out) => native().embedding(buf(table), code(table), table.shape[0], buf(ids), code(ids), buf(out), numel(ids), table.shape[1]),
    sort: (x, values, indices, descending) => native().sort(buf(x), buf(values), buf(indices), rowsOf(x), last(x), descending ? 1 : 0),
    topk: (x, k, values, indices) => native().topk(buf(x), buf(values), buf(indices), rowsOf(x), last(x), k),
    fusedElementwise,
    linearGroup,
    linearGroupQuantized: linearGroup,
    rotaryKVWrite,
    decodeAttention,
    normRotaryKVWrite,
    linearArgmax,
    linearArgmaxQuantized: linearArgmax,
  };
}
