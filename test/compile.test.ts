/**
 * torch.compile against eager: functions, a Module, and the stories260K forward (a llama-family
 * checkpoint: compiled logits equal eager's within 1e-5 and transformers' within 1e-4) on cpu,
 * and on webgpu (1e-4 of eager, 1e-3 of transformers) where an adapter opens. Stats prove reuse (same shape: no compile; new shape:
 * one compile; new dtype: a recompile whose failed guard is logged under TSORCH_LOGS=recompiles),
 * graph breaks are counted and never give a stale result, mutations are part of the graph, and a
 * replay allocates only its outputs. No timing.
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test, type TestContext } from "node:test";
import * as torch from "../src/index.js";
import type { Device } from "../src/devices/device.js";
import { Linear } from "../src/nn/layers.js";
import { quantizeLinears } from "../src/nn/quantized.js";
import { ropeCosSin } from "../src/nn/rotary.js";
import { AutoModelForCausalLM } from "../src/transformers/index.js";
import { flattenArgs, guardKey, leavesByIdentity, recentCall } from "../src/compile/guards.js";
import { maxAbsDiff, missing, readJson, STORIES } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";
import { graphLog } from "./helpers/graph_log.js";
import { lcgValues } from "./helpers/lcg.js";

function rand(shape: number[], seed: number, device: Device | string = "cpu"): torch.Tensor {
  return torch.tensor(lcgValues(shape.reduce((a, b) => a * b, 1), seed), { shape, device });
}

/** `lin` with its weight and bias (if any) filled from rand(seed), rand(seed + 1). */
function filled<L extends Linear>(lin: L, seed: number): L {
  lin.weight.set(rand([lin.outFeatures, lin.inFeatures], seed));
  lin.bias?.set(rand([lin.outFeatures], seed + 1));
  return lin;
}

async function close(a: torch.Tensor, b: torch.Tensor, tol: number, what: string): Promise<void> {
  assert.deepEqual(a.shape, b.shape, `${what}: shape`);
  const d = maxAbsDiff(Array.from(await a.data(), Number), Array.from(await b.data(), Number));
  assert.ok(d <= tol, `${what}: max |compiled - eager| = ${d} > ${tol}`);
}

/** A function of several kinds of ops: linear, broadcasting, a scalar operand, a reduction, softmax, views. */
function mixed(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor): { y: torch.Tensor; s: torch.Tensor } {
  const h = torch.silu(torch.linear(x, w)).mul(2).add(b);
  const y = torch.softmax(h.transpose(0, 1).contiguous(), -1).transpose(0, 1);
  return { y, s: torch.sum(h.sub(1), -1, true) };
}


async function functionsMatchEager(device: Device | string, tol: number): Promise<void> {
  torch.compiler.reset();
  const f = torch.compile(mixed);
  for (const [rows, seed] of [[3, 1], [3, 2], [5, 3], [3, 4]] as const) {
    const x = rand([rows, 8], seed, device), w = rand([6, 8], seed + 10, device), b = rand([6], seed + 20, device);
    const got = f(x, w, b), want = mixed(x, w, b);
    await close(got.y, want.y, tol, `y, ${rows} rows`);
    await close(got.s, want.s, tol, `s, ${rows} rows`);
  }
  const st = torch.compiler.stats();
  assert.equal(st.compiles, 2, "[3, 8] and [5, 8] each compile once");
  assert.equal(st.cacheHits, 2, "the second and fourth [3, 8] calls replay");
  assert.equal(st.graphBreaks, 0);

  const gated = torch.compile(function gated(g: torch.Tensor, u: torch.Tensor, r: torch.Tensor) { return torch.silu(g).mul(u).add(r).mul(0.5); });
  const [g, u, r] = [rand([4, 16], 1, device), rand([4, 16], 2, device), rand([16], 3, device)];
  assert.match(graphLog(() => gated(g, u, r)), /gated: 1 kernel calls \(0 dead removed, 3 fused away\)/, "the chain is one fused kernel");
  const [g2, u2] = [rand([4, 16], 4, device), rand([4, 16], 5, device)];
  await close(gated(g2, u2, r), torch.silu(g2).mul(u2).add(r).mul(0.5), tol, "fused silu(g) * u + r, replayed");
}

test("compile: a function equals eager on cpu (new values and shapes; replays from the cache; a fused chain)", async () => {
  await functionsMatchEager("cpu", 1e-5);
});

test("compile: data-dependent kernels (mixture-of-experts routing) see each call's indices", async () => {
  torch.compiler.reset();
  const experts = [rand([4, 8], 1), rand([4, 8], 2), rand([4, 8], 3)];
  const route = torch.compile(function route(x: torch.Tensor, idx: torch.Tensor) { return torch.relu(torch.gatherLinear(x, experts, idx)); });
  const x = rand([3, 8], 4);
  for (const ids of [[0, 1, 2], [2, 2, 0], [1, 0, 1]]) {
    const idx = torch.tensor(ids.map(BigInt), { dtype: "int64" });
    await close(route(x, idx), torch.relu(torch.gatherLinear(x, experts, idx)), 0, `experts ${ids}`);
  }
  assert.equal(torch.compiler.stats().cacheHits, 2);
});

test("compile: the cpu fused kernel refuses a malformed chain with a clear error", () => {
  const fused = torch.getKernel("fusedElementwise", "cpu");
  const x = rand([4], 1), out = torch.zeros([4]);
  assert.throws(() => fused([{ op: "add", args: [{ input: 0 }, { step: 0 }] }], [x], out), /fusedElementwise: step 0 is malformed/);
  assert.throws(() => fused([{ op: "exp", args: [{ input: 1 }] }], [x], out), /fusedElementwise: step 0 is malformed/);
});

test("compile: stats prove reuse, and a dtype change recompiles with its failed guard logged", async () => {
  torch.compiler.reset();
  const f = torch.compile(function scaled(x: torch.Tensor, k: number) { return x.mul(k).add(1); });
  const x = rand([4, 4], 7);
  f(x, 3);
  assert.deepEqual(torch.compiler.stats().compiles, 1);
  await close(f(rand([4, 4], 8), 3), rand([4, 4], 8).mul(3).add(1), 0, "same shape, new values");
  let st = torch.compiler.stats();
  assert.equal(st.compiles, 1, "a second call with the same shapes compiles nothing");
  assert.equal(st.cacheHits, 1);
  await close(f(x, 5), x.mul(5).add(1), 0, "a new scalar argument");
  assert.equal(torch.compiler.stats().compiles, 2, "a scalar argument is guarded");
  f(rand([2, 4], 9), 3);
  f(rand([2, 4], 10), 3);
  st = torch.compiler.stats();
  assert.equal(st.compiles, 3, "a new shape compiles once");
  assert.equal(st.cacheHits, 2);

  const logged: string[] = [];
  const original = console.error;
  const before = process.env.TSORCH_LOGS;
  process.env.TSORCH_LOGS = "recompiles";
  console.error = (...a: unknown[]) => { logged.push(a.join(" ")); };
  try {
    await close(f(x.to("float16"), 3), x.to("float16").mul(3).add(1), 0, "float16");
  } finally {
    console.error = original;
    if (before === undefined) delete process.env.TSORCH_LOGS;
    else process.env.TSORCH_LOGS = before;
  }
  st = torch.compiler.stats();
  assert.equal(st.compiles, 4);
  assert.match(st.recompileReasons.at(-1)!, /scaled: args\[0\]: dtype mismatch, expected float32, got float16/);
  assert.equal(logged.length, 1);
  assert.match(logged[0], /Recompiling function scaled[\s\S]*dtype mismatch, expected float32, got float16/);

  const many = torch.compile(function many(v: torch.Tensor) { return v.add(1); });
  for (let n = 1; n <= 66; n++) await close(many(torch.ones([n])), torch.full([n], 2), 0, `length ${n}`);
  st = torch.compiler.stats();
  assert.equal(st.compiles, 4 + 64, "one function keeps at most 64 graphs");
  assert.match(st.recompileReasons.at(-1)!, /many: recompile limit \(64 graphs\) reached/);
});

test("compile: a call is matched against the previous call's guards first; aliasing and alternating arguments still recompile or hit by key", async () => {
  torch.compiler.reset();
  const f = torch.compile(function pair(a: torch.Tensor, b: torch.Tensor, k: number) { return a.mul(k).add(b); });
  const a = rand([3, 5], 21), b = rand([3, 5], 22);
  await close(f(a, b, 2), a.mul(2).add(b), 0, "distinct storages");
  // The same signatures as the previous call but one storage for both tensors.
  await close(f(a, a, 2), a.mul(2).add(a), 0, "one storage");
  let st = torch.compiler.stats();
  assert.equal(st.compiles, 2, "arguments sharing a storage are guarded");
  assert.match(st.recompileReasons.at(-1)!, /pair: args\[1\]: aliasing changed \(shares storage with tensor argument 0 instead of 1\)/);
  await close(f(b, a, 2), b.mul(2).add(a), 0, "distinct storages again: the first graph");
  await close(f(a, b, 3), a.mul(3).add(b), 0, "k = 3");
  for (const k of [2, 3, 2]) await close(f(b, a, k), b.mul(k).add(a), 0, `k = ${k} again`);
  st = torch.compiler.stats();
  assert.equal(st.compiles, 3, "alternating between kept graphs compiles nothing");
  assert.equal(st.cacheHits, 4);
});

test("compile: a call passing the last call's objects but for new tensors of the same signature is matched by identity; a new tensor on a shared storage, a replaced aliased one or a mutated container is not", async () => {
  torch.compiler.reset();
  const f = torch.compile(function twice(a: torch.Tensor, b: torch.Tensor, k: number) { return a.mul(k).add(b); });
  const a = rand([3, 5], 31), b = rand([3, 5], 32), c = rand([3, 5], 33), e = rand([3, 5], 34);
  await close(f(a, b, 2), a.mul(2).add(b), 0, "first call");
  await close(f(c, b, 2), c.mul(2).add(b), 0, "a new tensor for a");
  await close(f(c, b, 2), c.mul(2).add(b), 0, "the same objects");
  let st = torch.compiler.stats();
  assert.deepEqual([st.compiles, st.cacheHits], [1, 2]);
  // A new tensor of the same signature on b's storage: the arguments now alias.
  const d = b.reshape([3, 5]);
  await close(f(d, b, 2), b.mul(2).add(b), 0, "a view of b for a");
  st = torch.compiler.stats();
  assert.equal(st.compiles, 2);
  assert.match(st.recompileReasons.at(-1)!, /twice: args\[1\]: aliasing changed/);
  // Replacing the aliased tensor by a distinct one: back to the first graph (by key, no compile).
  await close(f(e, b, 2), e.mul(2).add(b), 0, "a distinct tensor again");
  st = torch.compiler.stats();
  assert.deepEqual([st.compiles, st.cacheHits], [2, 3]);
  // A container mutated in place between calls is a new call however it is passed.
  const g = torch.compile(function total(xs: torch.Tensor[]) { return xs.reduce((s, x) => s.add(x)); });
  const xs = [a, b];
  await close(g(xs), a.add(b), 0, "two tensors");
  xs.push(c);
  await close(g(xs), a.add(b).add(c), 0, "three tensors, the same array");
  assert.match(torch.compiler.stats().recompileReasons.at(-1)!, /total: args\[0\]: expected array\(2\), got array\(3\)/);
});

test("compile guards: leavesByIdentity accepts exactly the calls that flatten to the same guards, with each leaf on the new call's tensor", () => {
  const a = rand([3, 5], 41), b = rand([3, 5], 42), c = rand([3, 5], 43), wide = rand([3, 6], 44);
  const recentOf = (args: unknown[]) => recentCall(args, flattenArgs(args))!;
  // A new tensor of the same signature on its own storage: the same guards, its leaf on it.
  let recent = recentOf([a, b, 2]);
  const leaves = leavesByIdentity(recent, [c, b, 2]);
  assert.ok(leaves, "a new tensor for a");
  assert.equal(leaves[0].tensor, c);
  assert.equal(leaves[1].tensor, b);
  assert.equal(guardKey(leaves), guardKey(flattenArgs([c, b, 2])));
  assert.deepEqual(recent.args, [c, b, 2], "the recent call is now this one");
  assert.equal(leavesByIdentity(recent, [c, b, 2]), recent.leaves, "the same objects: the same leaves");
  // Everything else takes the full check.
  recent = recentOf([a, b, 2]);
  assert.equal(leavesByIdentity(recent, [b.reshape([3, 5]), b, 2]), null, "a view of b: the arguments now alias");
  assert.equal(leavesByIdentity(recent, [b, a, 2]), null, "swapped");
  assert.equal(leavesByIdentity(recent, [wide, b, 2]), null, "another shape");
  assert.equal(leavesByIdentity(recent, [a, b, 3]), null, "another number");
  assert.equal(leavesByIdentity(recentOf([a, b, 0]), [a, b, -0]), null, "-0 after 0");
  assert.ok(leavesByIdentity(recentOf([a, b, Number.NaN]), [a, b, Number.NaN]), "NaN after NaN: the same guard");
  const view = a.reshape([3, 5]);
  assert.equal(leavesByIdentity(recentOf([a, view, 2]), [c, view, 2]), null, "replacing a tensor that shared its storage");
  assert.equal(leavesByIdentity(recentOf([a, b, 2]), [a, b]), null, "fewer arguments");
  assert.equal(recentCall([[a], b], flattenArgs([[a], b])), null, "a container: never matched by identity");
});

test("compile: guards see each argument's structure: an empty or reshaped container, another class, -0 and another symbol are new calls", async () => {
  torch.compiler.reset();
  const x = rand([2, 3], 31);
  // An empty object adds no value leaves: it must still differ from a missing argument.
  const scaled = torch.compile(function scaled(t: torch.Tensor, o: { k?: number } = { k: 2 }) { return t.mul(o.k ?? 1); });
  await close(scaled(x), x.mul(2), 0, "default options");
  await close(scaled(x, {}), x, 0, "empty options");
  // The same value at the same dotted path, reached through a nested object or a key with a dot.
  const nested = torch.compile(function nested(t: torch.Tensor, o: Record<string, unknown>) {
    return t.mul(typeof o.a === "object" ? (o.a as { b: number }).b : 3);
  });
  await close(nested(x, { a: { b: 5 } }), x.mul(5), 0, "nested");
  await close(nested(x, { "a.b": 5 }), x.mul(3), 0, "a dotted key");
  // Keys and values holding the key's own separators.
  const sep = torch.compile(function sep(t: torch.Tensor, o: Record<string, string>) { return t.mul(o.a === "p" ? 2 : 3); });
  await close(sep(x, { a: "p", b: "q" }), x.mul(2), 0, "two keys");
  await close(sep(x, { 'a="p"|args[1].b': "q" }), x.mul(3), 0, "one key spelling both");
  // A class instance and a plain object with the same fields; -0 and 0; two symbols of one name.
  class Scale { constructor(readonly k: number) {} }
  const cls = torch.compile(function cls(t: torch.Tensor, o: { k: number }) { return t.mul(o instanceof Scale ? o.k : -o.k); });
  await close(cls(x, new Scale(4)), x.mul(4), 0, "class instance");
  await close(cls(x, { k: 4 }), x.mul(-4), 0, "plain object");
  const zero = torch.compile(function zero(t: torch.Tensor, k: number) { return t.mul(Object.is(k, -0) ? -1 : 1); });
  await close(zero(x, 0), x, 0, "0");
  await close(zero(x, -0), x.mul(-1), 0, "-0");
  const A = Symbol("k"), B = Symbol("k");
  const sym = torch.compile(function sym(t: torch.Tensor, s: symbol) { return t.mul(s === A ? 1 : 2); });
  await close(sym(x, A), x, 0, "symbol A");
  await close(sym(x, B), x.mul(2), 0, "symbol B");
  const st = torch.compiler.stats();
  assert.equal(st.compiles, 12, "every second call recompiles");
  assert.equal(st.cacheHits, 0);
  assert.match(st.recompileReasons[0], /scaled: argument structure changed at args\[1\]|scaled: args\[1\]/);
});

test("compile: reading values or uploading host data breaks the graph; later calls stay correct (eager)", async () => {
  torch.compiler.reset();
  const reads = torch.compile(function reads(x: torch.Tensor) {
    void x.data(); // a read: what follows could depend on it
    return x.add(1);
  });
  const uploads = torch.compile(function uploads(x: torch.Tensor) {
    return x.add(torch.tensor([1, 2, 3, 4]));
  });
  let offset = 0;
  const closure = torch.compile(function closure(x: torch.Tensor) {
    return x.add(torch.tensor([offset, offset, offset, offset]));
  });
  for (const seed of [1, 2]) {
    const x = rand([4], seed);
    await close(reads(x), x.add(1), 0, "reads");
    await close(uploads(x), x.add(torch.tensor([1, 2, 3, 4])), 0, "uploads");
    offset = seed * 10;
    await close(closure(x), x.add(offset), 0, "host data from closure state is never baked");
  }
  const st = torch.compiler.stats();
  assert.equal(st.graphBreaks, 3);
  assert.equal(st.compiles, 3);
  assert.equal(st.cacheHits, 0, "a broken key runs eagerly");
  assert.match(st.graphBreakReasons.join("\n"), /reads: data\(\) reads tensor values on the host/);
  assert.match(st.graphBreakReasons.join("\n"), /uploads: host data \(4 values\) is uploaded inside the function/);

  const later = torch.compile(async function later(x: torch.Tensor) { return x.add(1); });
  await close(await later(torch.tensor([41])), torch.tensor([42]), 0, "async");
  assert.match(torch.compiler.stats().graphBreakReasons.at(-1)!, /later: the function is async/);
});

test("compile: mutations of a captured buffer and of an input are part of the graph", async () => {
  torch.compiler.reset();
  const cache = torch.zeros([4, 3]);
  const write = torch.compile(function write(k: torch.Tensor, out: torch.Tensor) {
    torch.copyInto(k.mul(2), cache.narrow(0, 1, 1)); // a KV-cache-like write into captured state
    torch.copyInto(k.add(1), out);                    // a write into an argument
    return torch.sum(cache, 0);
  });
  for (const seed of [1, 2, 3]) {
    const k = rand([1, 3], seed), out = torch.zeros([1, 3]);
    const total = write(k, out);
    const want = Array.from(await k.mul(2).data(), Number);
    assert.deepEqual(Array.from(await cache.narrow(0, 1, 1).data(), Number), want, `cache row 1, call ${seed}`);
    assert.deepEqual(Array.from(await total.data(), Number), want, `sum over the cache, call ${seed}`);
    assert.deepEqual(Array.from(await out.data(), Number), Array.from(await k.add(1).data(), Number), `argument written, call ${seed}`);
  }
  assert.equal(torch.compiler.stats().cacheHits, 2);
});

test("compile: dead code is removed and a replay allocates only its outputs", async () => {
  torch.compiler.reset();
  const dev = torch.getDevice("cpu");
  const f = torch.compile(function chain(x: torch.Tensor) {
    void torch.exp(x).mul(3); // never used
    let h = x;
    for (let i = 0; i < 6; i++) h = torch.softmax(h, -1);
    return h;
  });
  // Five 256-byte intermediates, each live from one softmax to the next: two buffers serve them all.
  assert.match(graphLog(() => f(rand([64], 1))), /chain: 6 kernel calls \(2 dead removed, 0 fused away\), intermediates 1280 -> 512 bytes/);
  const x = rand([64], 2);
  const allocate = dev.allocate.bind(dev);
  let allocations = 0;
  dev.allocate = (n: number) => { allocations++; return allocate(n); };
  let y: torch.Tensor;
  try {
    y = f(x);
  } finally {
    dev.allocate = allocate;
  }
  assert.equal(allocations, 1, "only the returned tensor is allocated");
  let h = x;
  for (let i = 0; i < 6; i++) h = torch.softmax(h, -1);
  await close(y, h, 0, "chain");
});

test("compile: a Module's forward; replacing a parameter recompiles; nested compiled calls are traced inline", async () => {
  torch.compiler.reset();
  const lin = filled(new Linear(8, 4), 1);
  const step = torch.compile(lin);
  const x = rand([2, 8], 3);
  await close(step(x), lin.forward(x), 0, "first call");
  await close(step(rand([2, 8], 4)), lin.forward(rand([2, 8], 4)), 0, "replay");
  lin.weight.set(rand([4, 8], 5));
  await close(step(x), lin.forward(x), 0, "after a new weight");
  const st = torch.compiler.stats();
  assert.equal(st.compiles, 2);
  assert.match(st.recompileReasons[0], /Linear: parameter 'weight' was replaced/);

  const outer = torch.compile((v: torch.Tensor) => torch.relu(step(v)));
  await close(outer(x), torch.relu(lin.forward(x)), 0, "outer, first call");
  await close(outer(rand([2, 8], 6)), torch.relu(lin.forward(rand([2, 8], 6))), 0, "outer, replay");
  assert.throws(() => torch.compile(42 as never), /compile: expected a function or a Module with forward, got number/);
});

test("compile: the parameter epoch gate still sees every way a module's parameter tensors change (to(), a parameter replaced, a child added)", async () => {
  torch.compiler.reset();
  class Two extends Linear {
    extra: Linear | null = null;
    addChild(): void { this.extra = this.module("extra", filled(new Linear(4, 4, false), 9)); }
    override forward(x: torch.Tensor): torch.Tensor { const y = super.forward(x); return this.extra ? this.extra.forward(y) : y; }
  }
  const lin = filled(new Two(8, 4), 1);
  const step = torch.compile(lin);
  const x = rand([2, 8], 3);
  await close(step(x), lin.forward(x), 0, "first call");
  await lin.to("cpu", "float16");
  await close(step(x), lin.forward(x), 0, "after to(float16)");
  lin.addChild();
  await close(step(x), lin.forward(x), 0, "after a child was added");
  const before = torch.compiler.stats().compiles;
  await close(step(x), lin.forward(x), 0, "replayed");
  assert.equal(torch.compiler.stats().compiles, before, "no recompile without a change");
  assert.equal(torch.compiler.stats().compiles, 3);
});

test("compile: quantizing a compiled module's Linears (quantizeLinears) recompiles: the replay computes with the quantized weights", async () => {
  torch.compiler.reset();
  const lin = filled(new Linear(64, 8), 11);
  const step = torch.compile(lin);
  const x = rand([2, 64], 13);
  const float = step(x);
  await close(float, lin.forward(x), 0, "float weights");
  quantizeLinears(lin, "int4");
  const quantized = step(x);
  await close(quantized, lin.forward(x), 0, "after quantizeLinears");
  assert.ok(maxAbsDiff(await quantized.data() as Float32Array, await float.data() as Float32Array) > 1e-3, "the int4 weights change the result");
  const st = torch.compiler.stats();
  assert.equal(st.compiles, 2);
  assert.match(st.recompileReasons[0], /Linear: parameter list \(2 -> 4 loaded parameters\)|quantized/);
});

/** logits of stories260K with rotary tables given as tensors (the model's forward builds them from JS positions). */
async function storiesForward(t: TestContext, device: string, tol: number, hfTol: number): Promise<void> {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const expected = readJson(path.join(STORIES, "expected.json"));
  const model = await AutoModelForCausalLM.fromPretrained(STORIES, { device }) as any;
  const dev = await torch.openDevice(device);
  const forward = (ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor): torch.Tensor => {
    let x = model.model.embed_tokens.forward(ids);
    for (const layer of model.model.layers.items) x = layer.forward(x, cos, sin, null, null);
    return model.lm_head.forward(model.model.norm.forward(x));
  };
  torch.compiler.reset();
  const compiled = torch.compile(forward);
  const gens = expected.generation as { input_ids: number[]; last_logits: number[] }[];
  for (const g of [...gens, ...gens]) {
    const L = g.input_ids.length;
    const ids = torch.tensor([g.input_ids], { dtype: "int64", device });
    const { cos, sin } = ropeCosSin(model.c.rope, [g.input_ids.map((_, i) => i)], dev);
    const got = torch.tidy(() => compiled(ids, cos, sin));
    await close(got, forward(ids, cos, sin), tol, `logits of ${L} tokens`);
    const last = Array.from(await got.narrow(1, L - 1, 1).data(), Number);
    assert.ok(maxAbsDiff(last, g.last_logits) < hfTol, `transformers' last logits: max diff ${maxAbsDiff(last, g.last_logits)}`);
  }
  const st = torch.compiler.stats();
  assert.equal(st.compiles, new Set(gens.map((g) => g.input_ids.length)).size);
  assert.equal(st.cacheHits, 2 * gens.length - st.compiles);
}

test("compile: stories260K forward on cpu equals eager within 1e-5", (t) => storiesForward(t, "cpu", 1e-5, 1e-4));

test("compile: on webgpu, functions within 1e-4 (elementwise chains fused) and the stories260K forward within 1e-4 of eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  await functionsMatchEager(dev, 1e-4);
  await storiesForward(t, "webgpu", 1e-4, 1e-3);
});

test("compile: on webgpu, a linear's residual add is fused into its epilogue (linearAdd) within 1e-4 of eager", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  torch.compiler.reset();
  const after = torch.compile(function after(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) { return torch.linear(x, w, b).add(r); });
  const before = torch.compile(function before(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) { return r.add(torch.linear(x, w)).mul(2); });
  for (const [rows, seed] of [[1, 1], [3, 2], [12, 3]] as const) {
    const x = rand([1, rows, 24], seed, dev), w = rand([40, 24], seed + 10, dev), b = rand([40], seed + 20, dev), r = rand([1, rows, 40], seed + 30, dev);
    assert.match(graphLog(() => after(x, w, b, r)), /after: 1 kernel calls \(0 dead removed, 1 fused away\)/, `${rows} rows: linear + add is one call`);
    assert.match(graphLog(() => before(x, w, r)), /before: 2 kernel calls \(0 dead removed, 1 fused away\)/, `${rows} rows: residual on the left`);
    const [x2, r2] = [rand([1, rows, 24], seed + 40, dev), rand([1, rows, 40], seed + 50, dev)];
    await close(after(x2, w, b, r2), torch.linear(x2, w, b).add(r2), 1e-4, `linear + bias + residual, ${rows} rows, replayed`);
    await close(before(x2, w, r2), r2.add(torch.linear(x2, w)).mul(2), 1e-4, `residual + linear, ${rows} rows, replayed`);
  }
  const x = rand([2, 24], 7, dev), w = rand([40, 24], 8, dev);
  const used = torch.compile(function used(x: torch.Tensor, w: torch.Tensor) { const y = torch.linear(x, w); return y.add(y); });
  assert.match(graphLog(() => used(x, w)), /used: 2 kernel calls \(0 dead removed, 0 fused away\)/, "a product read twice keeps its own kernel");
  await close(used(x, w), torch.linear(x, w).mul(2), 1e-4, "y + y");
});
