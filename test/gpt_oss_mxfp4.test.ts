/**
 * gpt-oss with MXFP4 expert weights, as the Hub files store them (`*_blocks` + `*_scales`,
 * quantization_config.quant_method "mxfp4"):
 * - dequantizeMxfp4 decodes bytes exactly as transformers' convert_moe_packed_tensors does
 *   (test/data/mxfp4_reference.json, made by test/data/make_mxfp4_reference.py);
 * - a hand-packed tiny checkpoint (the gpt_oss fixture with its expert weights packed to MXFP4
 *   here, in a temp dir) gives the same logits and greedy ids as the same model run on the
 *   dequantized weights (decoded here in plain JS and saved as an unquantized checkpoint), on cpu
 *   and webgpu. MXFP4 needs input sizes in whole blocks of 32, so the fixture's experts are first
 *   widened from intermediate 48 to 64 with zero weights and biases (gate = 0 makes those units
 *   output 0: the same function, checked against expected.json).
 */
import { native } from "../src/devices/cpu/native.js";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { readSafetensors, type RawTensor } from "../src/hub/index.js";
import * as T from "../src/index.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { fixtureExpected } from "./helpers/fixture_checks.js";
import { maxAbsDiff, missing, readJson, ROOT, TINY } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { tempDir } from "./helpers/temp_dir.js";

const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
const FIXTURE = path.join(TINY, "gpt_oss");

/** Little-endian int32 words of packed bytes. */
function words(bytes: number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i += 4) out.push((bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)) >> 0);
  return out;
}

test("dequantizeMxfp4 decodes as transformers' convert_moe_packed_tensors", async () => {
  const ref = readJson(path.join(ROOT, "test/data/mxfp4_reference.json"));
  const blocks: number[][][][] = ref.blocks, scales: number[][][] = ref.scales;
  const [E, OUT, NB] = [blocks.length, blocks[0].length, blocks[0][0].length];
  const padded = scales.flat().flatMap((row) => [...row, ...Array(Math.ceil(NB / 4) * 4 - NB).fill(0)]);
  const out = T.dequantizeMxfp4(
    T.tensor(words(blocks.flat(3)), { dtype: "int32", shape: [E, OUT, NB, 4] }),
    T.tensor(words(padded), { dtype: "int32", shape: [E, OUT, Math.ceil(NB / 4)] }),
  );
  // transformers returns [E, in, out]; tsorch's rows are [E, out, in].
  assert.deepEqual(Array.from((await out.transpose(1, 2).contiguous().data()) as Float32Array), ref.dequantized.flat(2));
});

// ------------------------------------------------------------------ packing the fixture

/** MXFP4 of row-major [rows, cols] values: blocks [rows, cols/32, 16] and scales [rows, cols/32] bytes. */
function quantize(values: Float32Array, rows: number, cols: number): { blocks: Uint8Array; scales: Uint8Array } {
  const nb = cols / 32, blocks = new Uint8Array(rows * nb * 16), scales = new Uint8Array(rows * nb);
  for (let r = 0; r < rows; r++) for (let g = 0; g < nb; g++) {
    const at = r * cols + g * 32;
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[at + j]));
    const exp = amax > 0 ? Math.ceil(Math.log2(amax / 6)) : -127;
    scales[r * nb + g] = exp + 127;
    for (let j = 0; j < 32; j++) {
      const x = values[at + j] / 2 ** exp;
      let best = 0;
      for (let c = 1; c < 16; c++) if (Math.abs(E2M1[c] - x) < Math.abs(E2M1[best] - x)) best = c;
      const byte = (r * nb + g) * 16 + (j >> 1);
      blocks[byte] |= j % 2 ? best << 4 : best;
    }
  }
  return { blocks, scales };
}

/** The inverse: float32 [rows, cols] (plain JS, independent of tsorch's kernels). */
function dequantize(blocks: Uint8Array, scales: Uint8Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let i = 0; i < rows * cols; i++) {
    const byte = blocks[i >> 1], code = i % 2 ? byte >> 4 : byte & 15;
    out[i] = E2M1[code] * 2 ** (scales[Math.floor(i / 32)] - 127);
  }
  return out;
}

/** Write a safetensors file (F32 / U8 tensors). */
function writeSafetensors(file: string, tensors: { name: string; dtype: "F32" | "U8"; shape: number[]; bytes: Uint8Array }[]): void {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.length] };
    offset += t.bytes.length;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([len, Buffer.from(json), ...tensors.map((t) => Buffer.from(t.bytes.buffer, t.bytes.byteOffset, t.bytes.length))]));
}

const f32 = (raw: RawTensor) => new Float32Array(raw.bytes.slice().buffer);
const bytesOf = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

const WIDE = 64;

/** The fixture's experts widened to intermediate WIDE with zeros: [E, H, 2I] / [E, 2I] / [E, I, H]. */
function widen(raw: RawTensor, I: number): RawTensor {
  const w = f32(raw), s = raw.shape;
  if (raw.name.endsWith("gate_up_proj") || raw.name.endsWith("gate_up_proj_bias")) {
    const rows = w.length / (2 * I), out = new Float32Array(rows * 2 * WIDE);
    for (let r = 0; r < rows; r++) out.set(w.subarray(r * 2 * I, (r + 1) * 2 * I), r * 2 * WIDE);
    return { ...raw, shape: [...s.slice(0, -1), 2 * WIDE], bytes: bytesOf(out) };
  }
  if (raw.name.endsWith("down_proj")) {
    const [E, , H] = s, out = new Float32Array(E * WIDE * H);
    for (let e = 0; e < E; e++) out.set(w.subarray(e * I * H, (e + 1) * I * H), e * WIDE * H);
    return { ...raw, shape: [E, WIDE, H], bytes: bytesOf(out) };
  }
  return raw;
}

/** Folders from the fixture (widened): unquantized, its experts packed to MXFP4 (Hub layout), and those dequantized. */
function packedFixture(): { widened: string; mxfp4: string; dequantized: string } {
  const original = readJson(path.join(FIXTURE, "config.json"));
  const config = { ...original, intermediate_size: WIDE };
  const weights = new Map([...readSafetensors(path.join(FIXTURE, "model.safetensors"))].map(([k, v]) => [k, widen(v, original.intermediate_size)]));
  const packed: Parameters<typeof writeSafetensors>[1] = [], plain: Parameters<typeof writeSafetensors>[1] = [];
  const widened = [...weights.values()].map((raw) => ({ name: raw.name, dtype: "F32" as const, shape: raw.shape, bytes: raw.bytes }));
  for (const [name, raw] of weights) {
    const m = /^(.*\.experts\.(gate_up_proj|down_proj))$/.exec(name);
    if (!m) {
      const t = { name, dtype: "F32" as const, shape: raw.shape, bytes: raw.bytes };
      packed.push(t);
      plain.push(t);
      continue;
    }
    // Stored [E, in, out] (x @ W); MXFP4 packs each expert's [out, in] rows.
    const [E, IN, OUT] = raw.shape, w = f32(raw);
    const rowsMajor = new Float32Array(E * OUT * IN);
    for (let e = 0; e < E; e++) for (let i = 0; i < IN; i++) for (let o = 0; o < OUT; o++) rowsMajor[(e * OUT + o) * IN + i] = w[(e * IN + i) * OUT + o];
    const { blocks, scales } = quantize(rowsMajor, E * OUT, IN);
    packed.push({ name: `${name}_blocks`, dtype: "U8", shape: [E, OUT, IN / 32, 16], bytes: blocks });
    packed.push({ name: `${name}_scales`, dtype: "U8", shape: [E, OUT, IN / 32], bytes: scales });
    const back = dequantize(blocks, scales, E * OUT, IN), inputMajor = new Float32Array(E * IN * OUT);
    for (let e = 0; e < E; e++) for (let i = 0; i < IN; i++) for (let o = 0; o < OUT; o++) inputMajor[(e * IN + i) * OUT + o] = back[(e * OUT + o) * IN + i];
    plain.push({ name, dtype: "F32", shape: raw.shape, bytes: bytesOf(inputMajor) });
  }
  const folder = (kind: string, tensors: typeof packed, cfg: Record<string, unknown>) => {
    const dir = tempDir(`tsorch-gpt-oss-${kind}-`);
    writeFileSync(path.join(dir, "config.json"), JSON.stringify(cfg));
    writeSafetensors(path.join(dir, "model.safetensors"), tensors);
    return dir;
  };
  const quantization_config = { quant_method: "mxfp4", modules_to_not_convert: ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"] };
  return {
    widened: folder("widened", widened, config),
    mxfp4: folder("mxfp4", packed, { ...config, quantization_config }),
    dequantized: folder("dequantized", plain, config),
  };
}

async function compare(device: string): Promise<void> {
  const e = fixtureExpected("gpt_oss");
  const { widened, mxfp4, dequantized } = packedFixture();
  const wide = (await (await AutoModelForCausalLM.fromPretrained(widened, { device })).logits(e.input_ids).data()) as Float32Array;
  assert.ok(maxAbsDiff(wide, e.logits.flat(2)) < 1e-3, `widened experts changed the function: ${maxAbsDiff(wide, e.logits.flat(2))}`);
  const q = await AutoModelForCausalLM.fromPretrained(mxfp4, { device });
  const d = await AutoModelForCausalLM.fromPretrained(dequantized, { device });
  assert.equal(q.stateDict().get("model.layers.0.mlp.experts.gate_up_proj_blocks")?.dtype, "int32");
  const got = (await q.logits(e.input_ids).data()) as Float32Array;
  const want = (await d.logits(e.input_ids).data()) as Float32Array;
  // MXFP4 experts are widened to bfloat16, which the cpu's AVX512-BF16 GEMM multiplies with
  // activations rounded to bfloat16 (the float32 reference is not): a looser bound there.
  const bf16Dot = device === "cpu" && /\bbf16=avx512-bf16\b/.test(native().cpuFeatures());
  const bound = bf16Dot ? 0.1 : 1e-5;
  assert.ok(maxAbsDiff(got, want) < bound, `MXFP4 vs dequantized: max abs diff ${maxAbsDiff(got, want)}`);
  // Packing changed the weights enough to tell the two apart from the unquantized fixture.
  assert.ok(maxAbsDiff(got, e.logits.flat(2)) > 1e-3, "MXFP4 logits equal the unquantized fixture's: were the blocks read?");
  const opts = { maxNewTokens: 12, doSample: false, eosTokenId: [] };
  const lp = e.greedy_left_padded;
  assert.deepEqual(await q.generate(lp.input_ids, { ...opts, attentionMask: lp.attention_mask }), await d.generate(lp.input_ids, { ...opts, attentionMask: lp.attention_mask }));
}

test("gpt_oss with hand-packed MXFP4 experts: logits and greedy ids equal those on the dequantized weights (cpu)", async (t) => {
  const skip = missing(FIXTURE);
  if (skip) return t.skip(skip);
  await compare("cpu");
});

test("gpt_oss with hand-packed MXFP4 experts: logits and greedy ids equal those on the dequantized weights (webgpu)", async (t) => {
  const skip = missing(FIXTURE);
  if (skip) return t.skip(skip);
  if (!(await webgpuOrSkip(t))) return;
  await compare("webgpu");
});

test("gpt_oss: a quantization method other than mxfp4 is refused by name", async (t) => {
  const skip = missing(FIXTURE);
  if (skip) return t.skip(skip);
  const config = { ...readJson(path.join(FIXTURE, "config.json")), quantization_config: { quant_method: "fp8" } };
  const { GptOssForCausalLM } = await import("../src/transformers/models/gpt_oss.js");
  assert.throws(() => new GptOssForCausalLM(config), /quant_method "fp8" is not supported \(supported: mxfp4\)/);
});
