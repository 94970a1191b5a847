/**
 * kernelize on the tiny fixtures with the hub kernels of hub-kernels/: RMSNorm, SiluAndMul and MoE
 * forwards replaced; logits within 1e-4 of transformers' (cpu) and of the built-in forward
 * (webgpu), greedy ids equal to transformers' — on every MoE family: qwen3_moe and mixtral (also
 * on webgpu), deepseek_v3, glm4_moe and qwen3_5_moe (cpu); gpt_oss and gemma4_moe, whose experts
 * the kernel's contract does not cover, keep the built-in forward with one message. Plus the
 * fallback rules.
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { kernelize, LayerRepository, type KernelMapping } from "../src/kernels/index.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { checkGreedy, checkLogits, fixtureExpected } from "./helpers/fixture_checks.js";
import { maxAbsDiff, missing, ROOT, TINY } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

const KERNELS = path.join(ROOT, "hub-kernels");
const repo = (name: string, layerName: string) => new LayerRepository({ repoId: path.join(KERNELS, name), layerName });

function mapping(device: string): KernelMapping {
  return {
    RMSNorm: { [device]: repo("rmsnorm", "RMSNorm") },
    SiluAndMul: { [device]: repo("silu-and-mul", "SiluAndMul") },
    MoE: { [device]: repo("moe-grouped-gemm", "MoE") },
  };
}

for (const arch of ["qwen3_moe", "mixtral"]) {
  const dir = path.join(TINY, arch);
  test(`${arch} (tiny) kernelized on cpu (cpu-wasm): logits within 1e-4 of transformers, greedy ids equal`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const replaced = await kernelize(model, { device: "cpu", mode: "inference", mapping: mapping("cpu") });
    assert.ok(replaced.RMSNorm > 0 && replaced.MoE > 0, JSON.stringify(replaced));
    const e = fixtureExpected(arch);
    await checkLogits(model, e, 1e-4);
    await checkGreedy(model, e);
  });

  test(`${arch} (tiny) kernelized on webgpu (webgpu-wgsl): logits within 1e-4 of the built-in forward (itself within 1e-3 of transformers), greedy ids equal`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    process.env.XDG_RUNTIME_DIR ??= "/tmp/xdg-runtime";
    if (!(await webgpuOrSkip(t))) return;
    const e = fixtureExpected(arch);
    const builtin = await AutoModelForCausalLM.fromPretrained(dir, { device: "webgpu" });
    const want = (await builtin.logits(e.input_ids).data()) as Float32Array;
    assert.ok(maxAbsDiff(want, e.logits.flat(2)) < 1e-3, "the built-in webgpu path (grouped gatherLinear) matches transformers");
    const model = await AutoModelForCausalLM.fromPretrained(dir, { device: "webgpu" });
    await kernelize(model, { device: "webgpu", mapping: mapping("webgpu") });
    const got = (await model.logits(e.input_ids).data()) as Float32Array;
    const d = maxAbsDiff(got, want);
    assert.ok(d <= 1e-4, `max |diff| ${d}`);
    const lp = e.greedy_left_padded;
    const out = await model.generate(lp.input_ids, { maxNewTokens: e.greedy.max_new_tokens, doSample: false, eosTokenId: [], attentionMask: lp.attention_mask });
    assert.deepEqual(out.map((r) => r.slice(lp.input_ids[0].length)), lp.new_tokens);
  });
}

// The other MoE families on cpu: deepseek_v3 and glm4_moe (group-limited routing + shared experts)
// and qwen3_5_moe (fused expert weights + gated shared expert) keep their routing and shared
// experts and run the routed experts through the kernel.
for (const arch of ["deepseek_v3", "glm4_moe", "qwen3_5_moe"]) {
  const dir = path.join(TINY, arch);
  test(`${arch} (tiny) kernelized on cpu (cpu-wasm): MoE blocks swapped, logits within 1e-4 of transformers, greedy ids equal`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const lines: string[] = [];
    const replaced = await kernelize(model, { device: "cpu", mapping: { MoE: mapping("cpu").MoE }, log: (l) => lines.push(l) });
    assert.ok(replaced.MoE > 0, JSON.stringify(replaced));
    assert.deepEqual(lines, []);
    const e = fixtureExpected(arch);
    await checkLogits(model, e, 1e-4);
    await checkGreedy(model, e);
  });
}

// Expert blocks the silu-gated contract cannot stand for keep the built-in forward, said once.
const keeps: [string, RegExp][] = [
  ["gpt_oss", /layer MoE keeps its built-in forward on cpu: model\.layers\.0\.mlp: gpt-oss experts use a clamped SwiGLU/],
  ["gemma4_moe", /layer MoE keeps its built-in forward on cpu: the model \(\w+\) has no module with a swappable MoE forward/],
];
for (const [arch, message] of keeps) {
  const dir = path.join(TINY, arch);
  test(`${arch} (tiny): kernelize keeps the built-in experts with one message; greedy ids equal transformers'`, async (t) => {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
    const model = await AutoModelForCausalLM.fromPretrained(dir);
    const lines: string[] = [];
    assert.deepEqual(await kernelize(model, { device: "cpu", mapping: { MoE: mapping("cpu").MoE }, log: (l) => lines.push(l) }), {});
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0], message);
    await checkGreedy(model, fixtureExpected(arch));
  });
}

test("kernelize: a device without a variant keeps the built-in forward and says so once; useFallback: false throws", async (t) => {
  const dir = path.join(TINY, "qwen3_moe");
  const skip = missing(dir);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  const lines: string[] = [];
  const only = { RMSNorm: { cpu: repo("rmsnorm", "RMSNormNotThere") } };
  assert.deepEqual(await kernelize(model, { device: "cpu", mapping: only, log: (l) => lines.push(l) }), {});
  assert.equal(lines.length, 1);
  assert.match(lines[0], /layer RMSNorm keeps its built-in forward on cpu: kernel .*rmsnorm has no cpu variant with layer RMSNormNotThere/);
  await assert.rejects(kernelize(model, { device: "cpu", mapping: only, useFallback: false }), /layer RMSNorm on cpu: .*\(useFallback is false\)/);
  await assert.rejects(kernelize(model, { device: "cpu", mapping: { Nope: {} } }), /no layer contract for Nope; known layers: RMSNorm, SiluAndMul, MoE/);
});
