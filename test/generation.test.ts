/**
 * Generation options beyond greedy: logits processors (against transformers' semantics and
 * outputs), seeded sampling, stop strings, EOS, streaming.
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { Worker } from "node:worker_threads";
import { AutoModelForCausalLM, AutoTokenizer } from "../src/transformers/index.js";
import { argmaxRow, minPWarper, repetitionPenalty, temperatureWarper, topKWarper, topPWarper, warp, warpMinP, warpTemperature, warpTopK, warpTopP } from "../src/transformers/generation/logits_process.js";
import { Random } from "../src/transformers/generation/rng.js";
import { missing, readJson, ROOT, STORIES } from "./helpers/shared.js";

const row = (xs: number[]) => Float32Array.from(xs);

test("logits processors follow transformers' definitions", () => {
  const s = row([2, -1, 0.5, 3]);
  repetitionPenalty(2)(s, [0, 1, 1]);
  assert.deepEqual(Array.from(s), [1, -2, 0.5, 3]); // positive / penalty, negative * penalty, once per id
  const t = row([2, -1]);
  temperatureWarper(0.5)(t, []);
  assert.deepEqual(Array.from(t), [4, -2]);
  const k = row([1, 3, 3, 2, 0]);
  topKWarper(2)(k, []);
  assert.deepEqual(Array.from(k), [-Infinity, 3, 3, -Infinity, -Infinity]); // ties at the k-th value are kept
  // probs of [ln 0.5, ln 0.3, ln 0.15, ln 0.05]: top-p 0.7 keeps 0.5 and 0.3 (mass 0.8 > 0.7).
  const p = row([Math.log(0.5), Math.log(0.3), Math.log(0.15), Math.log(0.05)]);
  topPWarper(0.7)(p, []);
  assert.deepEqual(Array.from(p).map((x) => x === -Infinity), [false, false, true, true]);
  const m = row([Math.log(0.5), Math.log(0.3), Math.log(0.15), Math.log(0.05)]);
  minPWarper(0.4)(m, []); // threshold 0.4 * 0.5 = 0.2
  assert.deepEqual(Array.from(m).map((x) => x === -Infinity), [false, false, true, true]);
  assert.throws(() => temperatureWarper(0), /temperature must be a strictly positive number/);
  assert.throws(() => topPWarper(1.5), /topP must be in \[0, 1\]/);
});

test("logits warpers on vocabulary-sized rows keep what transformers keeps (test/data/logits_warpers_reference.json)", () => {
  // transformers' top-p drops within a tie at its boundary by sorted position; ours keeps every token
  // tied with the least kept score, so the expected sets are the tokens >= transformers' least kept.
  const ref = readJson<{ vocab: number; cases: { row: string; warpers: Record<string, number>; least_kept: number; kept_at_or_above_min: number; at_or_above_index_sum: number }[] }>(
    path.join(ROOT, "test/data/logits_warpers_reference.json"));
  const V = ref.vocab;
  const rows: Record<string, (i: number) => number> = {
    flat: (i) => ((i * 7919) % 10007) / 1000 - 5,
    peaked: (i) => -Math.sqrt((i * 7919) % V),
    ties: (i) => -Math.floor(((i * 7919) % 10007) / 3) / 20,
  };
  for (const c of ref.cases) {
    const s = Float32Array.from({ length: V }, (_, i) => rows[c.row](i));
    const w = c.warpers;
    if (w.temperature !== undefined) temperatureWarper(w.temperature)(s, []);
    if (w.top_k !== undefined) topKWarper(w.top_k)(s, []);
    if (w.top_p !== undefined) topPWarper(w.top_p)(s, []);
    if (w.min_p !== undefined) minPWarper(w.min_p)(s, []);
    let kept = 0, indexSum = 0, least = Infinity;
    for (let i = 0; i < V; i++) if (s[i] > -Infinity) kept++, indexSum += i, least = Math.min(least, s[i]);
    const what = `${c.row} ${JSON.stringify(w)}`;
    assert.equal(kept, c.kept_at_or_above_min, what);
    assert.equal(indexSum, c.at_or_above_index_sum, what);
    assert.equal(least, c.least_kept, what);
    // generate's form: the warpers in a chain (after top-k they read only its survivors) give the
    // same row, and Random.sample over the survivors draws what it draws over the whole row.
    const chained = Float32Array.from({ length: V }, (_, i) => rows[c.row](i));
    const at = warp(chained, [
      ...(w.temperature !== undefined ? [warpTemperature(w.temperature)] : []), ...(w.top_k !== undefined ? [warpTopK(w.top_k)] : []),
      ...(w.top_p !== undefined ? [warpTopP(w.top_p)] : []), ...(w.min_p !== undefined ? [warpMinP(w.min_p)] : []),
    ]);
    assert.deepEqual(chained, s, what);
    const [a, b] = [new Random(5), new Random(5)];
    for (let d = 0; d < 20; d++) assert.equal(a.sample(chained, at), b.sample(s), what);
  }
});

test("warpers at their edges: top-p near 1 ends, NaN or +Infinity rows are left as transformers leaves them, argmax takes the first NaN", async () => {
  // More than 64 finite scores send top-p to its quickselect, whose running mass could reach the
  // target by rounding and loop forever (p = 1 and 1 - 2^-53 on these rows did): run in a worker,
  // so that a hang fails the test instead of stopping the run.
  const code = `(async () => {
    const { topPWarper } = await import(${JSON.stringify(new URL("../src/transformers/generation/logits_process.js", import.meta.url).href)});
    let kept = 0;
    for (const p of [1, 0.9999999999999999, 1 - 1e-15]) for (const mul of [1, 3, 7]) {
      const s = Float32Array.from({ length: 2000 }, (_, i) => -Math.sqrt((i * mul) % 2000));
      topPWarper(p)(s, []);
      kept += s.some((x) => x > -Infinity) ? 1 : 0;
    }
    require("node:worker_threads").parentPort.postMessage(kept);
  })();`;
  const worker = new Worker(code, { eval: true });
  let timer: NodeJS.Timeout | undefined;
  const kept = await Promise.race([
    new Promise<number>((resolve, reject) => { worker.once("message", resolve); worker.once("error", reject); }),
    new Promise<string>((resolve) => { timer = setTimeout(() => resolve("timed out"), 20_000); }),
  ]);
  clearTimeout(timer);
  await worker.terminate();
  assert.equal(kept, 9, "top-p near 1 on 2000 scores: every row returns and keeps a token");
  // transformers' softmax of a row holding NaN or +Infinity is NaN: top-p and min-p then drop nothing.
  for (const bad of [NaN, Infinity]) {
    for (const f of [topPWarper(0.5), minPWarper(0.1)]) {
      const s = row([bad, 0, 1, -3]);
      f(s, []);
      assert.deepEqual(Array.from(s).slice(1), [0, 1, -3]);
    }
  }
  assert.equal(argmaxRow(row([1, 5, NaN, 7])), 2);
  assert.equal(argmaxRow(row([1, 5, 5, 2])), 1);
});

test("seeded sampling is reproducible and follows the distribution", () => {
  const scores = row([Math.log(0.7), Math.log(0.2), Math.log(0.1)]);
  const counts = [0, 0, 0];
  const rng = new Random(42);
  for (let i = 0; i < 20000; i++) counts[rng.sample(scores)]++;
  assert.ok(Math.abs(counts[0] / 20000 - 0.7) < 0.02 && Math.abs(counts[2] / 20000 - 0.1) < 0.02, `counts ${counts}`);
  const a = new Random(7), b = new Random(7);
  assert.deepEqual(Array.from({ length: 5 }, () => a.next()), Array.from({ length: 5 }, () => b.next()));
});

test("stories260K: repetition penalty and stop strings match transformers; sampling, EOS, streaming", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  const model = await AutoModelForCausalLM.fromPretrained(STORIES);
  const tokenizer = await AutoTokenizer.fromPretrained(STORIES);
  const prompt = tokenizer.encode("Once upon a time");
  // References: transformers 5.18 generate(max_new_tokens=32, do_sample=False, repetition_penalty=1.3)
  // and generate(max_new_tokens=64, do_sample=False, stop_strings=["Lily"], tokenizer=...).
  const penalised = await model.generate(prompt, { maxNewTokens: 32, doSample: false, repetitionPenalty: 1.3 });
  assert.deepEqual(penalised.slice(prompt.length), [432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 335, 311, 374, 419, 426, 385]);
  const stopped = await model.generate(prompt, { maxNewTokens: 64, doSample: false, stopStrings: ["Lily"], tokenizer });
  assert.deepEqual(stopped.slice(prompt.length), [432, 383, 286, 261, 376, 298, 315, 421, 395, 317]);

  const sample = (seed: number) => model.generate(prompt, { maxNewTokens: 24, doSample: true, temperature: 0.8, topK: 40, topP: 0.95, seed });
  const s1 = await sample(1);
  assert.deepEqual(await sample(1), s1);
  assert.notDeepEqual(await sample(2), s1);
  const greedyNew = readJson(path.join(STORIES, "expected.json")).generation[0].greedy_new_ids as number[];
  const topK1 = await model.generate(prompt, { maxNewTokens: 16, doSample: true, topK: 1, seed: 3 });
  assert.deepEqual(topK1.slice(prompt.length), greedyNew.slice(0, 16)); // top-k 1 sampling is greedy

  const eos = greedyNew[5];
  const early = await model.generate(prompt, { maxNewTokens: 64, eosTokenId: eos });
  assert.deepEqual(early.slice(prompt.length), greedyNew.slice(0, greedyNew.indexOf(eos) + 1));

  const bad: [unknown, RegExp][] = [
    [{ topP: -0.1, doSample: true }, /topP must be a number in \[0, 1\]/],
    [{ topK: -1, doSample: true }, /topK must be a non-negative integer/],
    [{ temperature: 0, doSample: true }, /temperature must be a strictly positive number/],
    [{ maxNewTokens: 1.5 }, /maxNewTokens must be a positive integer/],
    [{ stopStrings: [""], tokenizer }, /stopStrings must be a non-empty string/],
    [{ attentionMask: [[0, 0, 0, 0, 0]] }, /masks every token/],
    [{ attentionMask: [[1, 1, 1, 1, 0]] }, /not left-padded/],
    [{ attentionMask: [[1, 2, 1, 1, 1]] }, /only 0 and 1/],
  ];
  for (const [opts, re] of bad) assert.throws(() => model.generateStream([prompt], opts as never), re);
  await assert.rejects(model.generate([1, 2.5]), /token id 2\.5 at \[0\]\[1\] is not an integer in \[0, 512\)/);
  await assert.rejects(model.generate([1, 512]), /token id 512/);
  await assert.rejects(AutoModelForCausalLM.fromPretrained(STORIES, { dtype: "int32" }), /not a weight dtype; supported: auto, float32, bfloat16, float16, int8, int4/);
  await assert.rejects(AutoModelForCausalLM.fromPretrained(STORIES, { dtype: "int3" }), /unknown dtype 'int3'; supported: auto, float32/);
  assert.throws(() => model.logits(model.idsTensor([[1, 2]]) as never), /logits: expected token ids as number\[\]\[\] .* got Tensor/);
  assert.deepEqual(model.logits(prompt).shape, model.logits([prompt]).shape);

  const steps: number[][] = [];
  for await (const step of model.generateStream([prompt], { maxNewTokens: 6 })) steps.push(step);
  assert.deepEqual(steps, greedyNew.slice(0, 6).map((t) => [t]));
  // A single prompt may also be given flat (tokenizer.encode's output), as generate() takes it.
  const flat: number[][] = [];
  for await (const step of model.generateStream(prompt, { maxNewTokens: 6 })) flat.push(step);
  assert.deepEqual(flat, steps);
});

test("fromPretrained refuses an option it does not take, naming the closest", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  await assert.rejects(AutoModelForCausalLM.fromPretrained(STORIES, { dtyp: "float16" } as never), /fromPretrained: unknown option 'dtyp'; did you mean 'dtype'\?/);
});
