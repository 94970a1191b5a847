/** bench/decode_step.ts: the weight bytes of each GEMV call of a compiled decode step, in order. */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { decodeStepCallBytes, decodeWeightBytesPerToken, namedLinears } from "../bench/decode_step.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { missing, readJson, TINY } from "./helpers/shared.js";

/** A tiny fixture's [out, in] weight sizes (elements) from its config.json. */
function dims(name: string) {
  const c = readJson(path.join(TINY, name, "config.json"));
  const H = c.hidden_size, hd = c.head_dim ?? H / c.num_attention_heads;
  return { c, H, q: c.num_attention_heads * hd, kv: c.num_key_value_heads * hd, I: c.intermediate_size };
}

test("decodeStepCallBytes: per layer q/k/v as one call, o, gate/up as one call, down; then the LM head (float32 and int4 weights)", async (t) => {
  const skip = missing(path.join(TINY, "qwen3"));
  if (skip) return t.skip(skip);
  const { c, H, q, kv, I } = dims("qwen3");
  const layer = [(q + 2 * kv) * H, H * q, 2 * I * H, H * I];
  const weights = [...Array.from({ length: c.num_hidden_layers }, () => layer).flat(), c.vocab_size * H];
  // float32: 4 bytes a weight; int4: a half-byte code and a float32 scale per 32 weights.
  for (const [dtype, perWeight] of [["float32", 4], ["int4", 0.5 + 4 / 32]] as const) {
    const model = await AutoModelForCausalLM.fromPretrained(path.join(TINY, "qwen3"), { dtype });
    assert.deepEqual(decodeStepCallBytes(namedLinears(model)), weights.map((n) => n * perWeight), dtype);
  }
});

test("decodeStepCallBytes: linears with a bias are calls of their own (Qwen2's q/k/v); MoE experts give no step list", async (t) => {
  const skip = missing(path.join(TINY, "qwen2")) ?? missing(path.join(TINY, "qwen3_moe"));
  if (skip) return t.skip(skip);
  // Qwen2's q/k/v carry biases (transformers' Qwen2Attention), which the compile pass does not group.
  const { c, H, q, kv, I } = dims("qwen2");
  const layer = [q * H, kv * H, kv * H, H * q, 2 * I * H, H * I];
  const weights = [...Array.from({ length: c.num_hidden_layers }, () => layer).flat(), c.vocab_size * H];
  const qwen2 = await AutoModelForCausalLM.fromPretrained(path.join(TINY, "qwen2"), { dtype: "float32" });
  assert.deepEqual(decodeStepCallBytes(namedLinears(qwen2)), weights.map((n) => n * 4));
  const moe = await AutoModelForCausalLM.fromPretrained(path.join(TINY, "qwen3_moe"), { dtype: "float32" });
  assert.equal(decodeStepCallBytes(namedLinears(moe)), null);
});

test("decodeWeightBytesPerToken: a dense model reads every Linear; a MoE token only its k routed experts' share (Qwen3-MoE, Mixtral)", async (t) => {
  const skip = missing(path.join(TINY, "qwen3")) ?? missing(path.join(TINY, "qwen3_moe")) ?? missing(path.join(TINY, "mixtral"));
  if (skip) return t.skip(skip);
  const qwen3 = await AutoModelForCausalLM.fromPretrained(path.join(TINY, "qwen3"), { dtype: "float32" });
  const all = namedLinears(qwen3);
  assert.equal(decodeWeightBytesPerToken(qwen3, all), decodeStepCallBytes(all)!.reduce((a, b) => a + b, 0));
  for (const name of ["qwen3_moe", "mixtral"]) {
    // Per layer: q, k, v, o, the router [E, H], and E experts of gate/up [I, H] and down [H, I],
    // of which a token reads k; then the LM head. float32: 4 bytes a weight.
    const { c, H, q, kv } = dims(name);
    const E = c.num_local_experts, k = c.num_experts_per_tok, I = c.moe_intermediate_size ?? c.intermediate_size;
    const layer = 2 * q * H + 2 * kv * H + E * H + (k / E) * E * 3 * I * H;
    const want = 4 * (c.num_hidden_layers * layer + c.vocab_size * H);
    const model = await AutoModelForCausalLM.fromPretrained(path.join(TINY, name), { dtype: "float32" });
    assert.equal(decodeWeightBytesPerToken(model, namedLinears(model)), want, name);
  }
});
