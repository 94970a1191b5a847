/** bench/decode_step.ts: the weight bytes of each GEMV call of a compiled decode step, in order. */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { decodeStepCallBytes, namedLinears } from "../bench/decode_step.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { missing, readJson, TINY } from "./helpers/shared.js";

const QWEN3 = path.join(TINY, "qwen3");

test("decodeStepCallBytes: per layer q/k/v as one call, o, gate/up as one call, down; then the LM head (float32 and int4 weights)", async (t) => {
  const skip = missing(QWEN3);
  if (skip) return t.skip(skip);
  // The step's [out, in] weights from config.json (Qwen3: q_proj [heads * head_dim, hidden], ...).
  const c = readJson(path.join(QWEN3, "config.json"));
  const H = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim, I = c.intermediate_size;
  const layer = [(q + 2 * kv) * H, H * q, 2 * I * H, H * I];
  const weights = [...Array.from({ length: c.num_hidden_layers }, () => layer).flat(), c.vocab_size * H];
  // float32: 4 bytes a weight; int4: a half-byte code and a float32 scale per 32 weights.
  for (const [dtype, perWeight] of [["float32", 4], ["int4", 0.5 + 4 / 32]] as const) {
    const model = await AutoModelForCausalLM.fromPretrained(QWEN3, { dtype });
    assert.deepEqual(decodeStepCallBytes(namedLinears(model)), weights.map((n) => n * perWeight), dtype);
  }
});
