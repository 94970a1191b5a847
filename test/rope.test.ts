/**
 * Rotary tables of the scaled rope types against transformers 5.18: "dynamic" (NTK, recomputed as
 * sequences grow and reset when they shrink back), "yarn" (ramp, truncate, mscale, attention_factor,
 * partial rotary) and Gemma 3's per-layer-type tables (nested rope_parameters and the legacy
 * rope_theta / rope_local_base_freq / rope_scaling fields).
 *
 * How the reference numbers were produced: with the reference venv (../shared/tools/reference-venv.sh),
 * for head_dim 16 (hidden 64, 4 heads):
 *   emb = LlamaRotaryEmbedding(LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=16,
 *                                          max_position_embeddings=M, rope_parameters=ROPE))
 *   cos, sin = emb(torch.zeros(1), torch.tensor([positions]))   # then emb.inv_freq, emb.attention_scaling
 * - DYNAMIC_STEPS: one emb (M = 32, {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})
 *   called in turn with positions 0..7, 0..39, [40], [45], 0..9; inv_freq after each call and
 *   cos/sin (first half) of its last position.
 * - YARN_CASES: inv_freq, attention_scaling and cos/sin (first half) at position 63.
 * - GEMMA3_CASES: Gemma3RotaryEmbedding(Gemma3TextConfig(hidden_size=64, num_attention_heads=4,
 *   head_dim=16, num_hidden_layers=6, max_position_embeddings=256, **config)).<type>_inv_freq.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { openDevice } from "../src/index.js";
import { computeInvFreq, ropeCosSin, UnsupportedRopeError, type RopeTables } from "../src/nn/rotary.js";
import { ropeParameters } from "../src/transformers/configuration.js";
import { Gemma3TextConfig } from "../src/transformers/models/gemma3.js";

const DYNAMIC_STEPS = [
  { lastPosition: 7, invFreq: [1.0, 0.3162277638912201, 0.10000000149011612, 0.03162277862429619, 0.009999999776482582, 0.003162277862429619, 0.0010000000474974513, 0.0003162277862429619],
    cos: [0.7539022564888, -0.5994374752044678, 0.7648422122001648, 0.9755998849868774, 0.9975510239601135, 0.9997550249099731, 0.9999755024909973, 0.9999975562095642],
    sin: [0.6569865942001343, 0.8004215955734253, 0.6442176699638367, 0.21955610811710358, 0.06994284689426422, 0.02213413640856743, 0.0069999429397284985, 0.002213592641055584] },
  { lastPosition: 39, invFreq: [1.0, 0.2984311282634735, 0.08906113356351852, 0.026578612625598907, 0.007931885309517384, 0.0023671214003115892, 0.0007064226665534079, 0.00021081851446069777],
    cos: [0.2666429281234741, 0.5997908711433411, -0.945460319519043, 0.509178876876831, 0.9525336623191833, 0.9957417249679565, 0.9996204972267151, 0.9999662041664124],
    sin: [0.9637953639030457, -0.800156831741333, -0.325737327337265, 0.86066073179245, 0.3044333755970001, 0.09218665957450867, 0.027546998113393784, 0.008221830241382122] },
  { lastPosition: 40, invFreq: [1.0, 0.2966958284378052, 0.08802840858697891, 0.026117660105228424, 0.007749001029878855, 0.0022990962024778128, 0.0006821322022005916, 0.00020238578144926578],
    cos: [-0.666938066482544, 0.7657835483551025, -0.9288338422775269, 0.5021559000015259, 0.9523457884788513, 0.9957743287086487, 0.9996277689933777, 0.9999672174453735],
    sin: [0.7451131343841553, -0.6430984139442444, -0.37049663066864014, 0.8647770881652832, 0.3050205707550049, 0.09183427691459656, 0.027281902730464935, 0.00809534266591072] },
  { lastPosition: 45, invFreq: [1.0, 0.2890678644180298, 0.08356022834777832, 0.024154577404260635, 0.006982312072068453, 0.0020183620508760214, 0.0005834436160512269, 0.0001686547911958769],
    cos: [0.5253220200538635, 0.9040334820747375, -0.8146808743476868, 0.4651820957660675, 0.9510427117347717, 0.9958781003952026, 0.9996553659439087, 0.9999712109565735],
    sin: [0.8509035110473633, 0.427461713552475, -0.5799095034599304, 0.8852149844169617, 0.30905959010124207, 0.09070146828889847, 0.02625194750726223, 0.007589392829686403] },
  { lastPosition: 9, invFreq: [1.0, 0.3162277638912201, 0.10000000149011612, 0.03162277862429619, 0.009999999776482582, 0.003162277862429619, 0.0010000000474974513, 0.0003162277862429619],
    cos: [-0.9111302495002747, -0.9566441774368286, 0.6216099262237549, 0.9597726464271545, 0.9959527254104614, 0.999595046043396, 0.9999595284461975, 0.9999959468841553],
    sin: [0.41211849451065063, 0.291259229183197, 0.7833269238471985, 0.28077834844589233, 0.08987854421138763, 0.028456658124923706, 0.008999879471957684, 0.002846046118065715] },
];
const YARN_CASES = [
  { name: "yarn_default", rope: {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "original_max_position_embeddings": 2048}, maxPositions: 8192,
    invFreq: [1.0, 0.3162277638912201, 0.10000000149011612, 0.025693506002426147, 0.00624999962747097, 0.0013834965648129582, 0.0002500000118743628, 7.905694656074047e-05], attentionScaling: 1.138629436111989,
    cos63: [1.1225708723068237, 0.5438907742500305, 1.1384685039520264, -0.05451326444745064, 1.0514979362487793, 1.1343071460723877, 1.1384881734848022, 1.138615369796753],
    sin63: [0.1905561238527298, 1.000329852104187, 0.019145017489790916, 1.1373237371444702, 0.43683987855911255, 0.09911765903234482, 0.017932672053575516, 0.00567102013155818] },
  { name: "yarn_no_truncate_mscale", rope: {"rope_type": "yarn", "factor": 8.0, "rope_theta": 500000.0, "original_max_position_embeddings": 2048, "beta_fast": 16, "beta_slow": 2, "mscale": 0.707, "mscale_all_dim": 1.0, "truncate": false}, maxPositions: 16384,
    invFreq: [1.0, 0.193922758102417, 0.033389899879693985, 0.0014415655750781298, 0.00017677668074611574, 3.428102354519069e-05, 6.647869668086059e-06, 1.289173155782919e-06], attentionScaling: 0.9495608824621653,
    cos63: [0.9361688494682312, 0.8922396898269653, -0.48230019211769104, 0.9456475377082825, 0.9495019912719727, 0.949558675289154, 0.949560821056366, 0.9495608806610107],
    sin63: [0.15891443192958832, -0.32492175698280334, 0.8179562091827393, 0.08611931651830673, 0.010574975050985813, 0.002050769282504916, 0.000397691095713526, 7.71213453845121e-05] },
  { name: "yarn_attention_factor_partial", rope: {"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0, "attention_factor": 1.25, "original_max_position_embeddings": 16, "partial_rotary_factor": 0.5}, maxPositions: 32,
    invFreq: [1.0, 0.05000000074505806, 0.004999999888241291, 0.0005000000237487257], attentionScaling: 1.25,
    cos63: [1.2323707342147827, -1.2499557733535767, 1.188495397567749, 1.2493798732757568],
    sin63: [0.2091946303844452, -0.010509178973734379, 0.38727059960365295, 0.03936849161982536] },
];
const GEMMA3_CASES = [
  { name: "legacy", config: {"rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
    full_attention: { invFreq: [0.125, 0.02222849242389202, 0.0039528473280370235, 0.0007029266562312841, 0.0001250000059371814, 2.2228492525755428e-05, 3.9528467823402025e-06, 7.029266839708725e-07], attentionScaling: 1.0 },
    sliding_attention: { invFreq: [1.0, 0.3162277638912201, 0.10000000149011612, 0.03162277862429619, 0.009999999776482582, 0.003162277862429619, 0.0010000000474974513, 0.0003162277862429619], attentionScaling: 1.0 },
  },
  { name: "nested", config: {"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1000000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    full_attention: { invFreq: [1.0, 0.13337095081806183, 0.015811389312148094, 0.0014058533124625683, 0.0002500000118743628, 4.4456985051510856e-05, 7.905693564680405e-06, 1.405853367941745e-06], attentionScaling: 1.138629436111989 },
    sliding_attention: { invFreq: [1.0, 0.3162277638912201, 0.10000000149011612, 0.03162277862429619, 0.009999999776482582, 0.003162277862429619, 0.0010000000474974513, 0.0003162277862429619], attentionScaling: 1.0 },
  },
];

const HEAD_DIM = 16;

/** Largest |a - b| / max(|b|, 1e-30): frequencies are compared relatively (they span 1 to 1e-6). */
function maxRelDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < b.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]) / Math.max(Math.abs(b[i]), 1e-30));
  return m;
}

/** cos/sin (first half of the rotary dims) at the last position of `positions`, and the check that the second half repeats it. */
async function lastCosSin(t: RopeTables, positions: number[]): Promise<{ cos: number[]; sin: number[] }> {
  const { cos, sin } = ropeCosSin(t, [positions], await openDevice("cpu"));
  const half = t.dim / 2;
  const last = async (x: typeof cos) => {
    const row = Array.from((await x.data()) as Float32Array).slice(-t.dim);
    assert.deepEqual(row.slice(half), row.slice(0, half));
    return row.slice(0, half);
  };
  return { cos: await last(cos), sin: await last(sin) };
}

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

test("dynamic NTK rope: frequencies follow the longest sequence and reset below max_position_embeddings", async () => {
  const rope = ropeParameters({ rope_parameters: { rope_type: "dynamic", factor: 2.0, rope_theta: 10000.0 }, max_position_embeddings: 32 });
  const t = computeInvFreq(rope, HEAD_DIM);
  const calls = [range(0, 7), range(0, 39), [40], [45], range(0, 9)];
  for (const [i, positions] of calls.entries()) {
    const want = DYNAMIC_STEPS[i];
    assert.equal(positions[positions.length - 1], want.lastPosition);
    const { cos, sin } = await lastCosSin(t, positions);
    assert.ok(maxRelDiff(t.invFreq, want.invFreq) < 1e-6, `call ${i}: inv_freq ${t.invFreq} vs ${want.invFreq}`);
    assert.ok(maxRelDiff(cos, want.cos) < 1e-5 && maxRelDiff(sin, want.sin) < 1e-5, `call ${i}: cos/sin`);
  }
});

test("yarn rope: frequencies, attention factor and scaled cos/sin match transformers", async () => {
  for (const c of YARN_CASES) {
    const t = computeInvFreq(ropeParameters({ rope_parameters: c.rope, max_position_embeddings: c.maxPositions }), HEAD_DIM);
    assert.equal(t.dim, 2 * c.invFreq.length, c.name);
    assert.ok(maxRelDiff(t.invFreq, c.invFreq) < 1e-6, `${c.name}: inv_freq ${t.invFreq} vs ${c.invFreq}`);
    assert.ok(Math.abs(t.attentionScaling - c.attentionScaling) < 1e-12, `${c.name}: attention factor ${t.attentionScaling}`);
    const { cos, sin } = await lastCosSin(t, range(0, 63));
    assert.ok(maxRelDiff(cos, c.cos63) < 1e-5 && maxRelDiff(sin, c.sin63) < 1e-5, `${c.name}: cos/sin at position 63`);
  }
});

test("yarn without original_max_position_embeddings falls back to max_position_embeddings", () => {
  const explicit = computeInvFreq(ropeParameters({ rope_scaling: { type: "yarn", factor: 4.0, original_max_position_embeddings: 2048 }, max_position_embeddings: 4096 }), HEAD_DIM);
  const implied = computeInvFreq(ropeParameters({ rope_scaling: { type: "yarn", factor: 4.0 }, max_position_embeddings: 2048 }), HEAD_DIM);
  assert.deepEqual(implied.invFreq, explicit.invFreq);
});

test("Gemma 3: rotary tables per layer type, from nested rope_parameters or the legacy fields", () => {
  for (const c of GEMMA3_CASES) {
    const config = new Gemma3TextConfig({ hidden_size: 64, num_attention_heads: 4, head_dim: HEAD_DIM, num_hidden_layers: 6, max_position_embeddings: 256, ...c.config });
    for (const type of ["full_attention", "sliding_attention"] as const) {
      const t = config.ropeFor(type);
      assert.ok(maxRelDiff(t.invFreq, c[type].invFreq) < 1e-6, `${c.name} ${type}: inv_freq ${t.invFreq} vs ${c[type].invFreq}`);
      assert.ok(Math.abs(t.attentionScaling - c[type].attentionScaling) < 1e-12, `${c.name} ${type}: attention factor`);
    }
  }
});

test("an unsupported rope type throws naming it", () => {
  assert.throws(() => computeInvFreq(ropeParameters({ rope_scaling: { rope_type: "su", factor: 2 } }), HEAD_DIM), (e: Error) => e instanceof UnsupportedRopeError && /'su'/.test(e.message));
});
