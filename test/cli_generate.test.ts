/**
 * `tsorch generate` against transformers 5.18 (test/data/generation_reference.json): every
 * reference case that its flags can express, with --output json's finish_reason; flags beat
 * generation_config.json; errors name the flag, exit 2 for usage errors, and come before the
 * weights load.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { unlinkSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { caseModelDir, cliFlags, expectedError, generationCases, SOURCES } from "./helpers/generation_cases.js";
import { CLI, missing, STORIES } from "./helpers/shared.js";

const run = promisify(execFile);

async function tsorch(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { maxBuffer: 1 << 26 });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

function assertError(r: { code: number; stderr: string }, code: number, pattern: RegExp, what: string): void {
  assert.equal(r.code, code, `${what}: exit ${r.code}, stderr: ${r.stderr}`);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `${what}: expected a one-line error, got:\n${r.stderr}`);
  assert.match(lines[0], /^tsorch: error: /, what);
  assert.match(lines[0], pattern, what);
}

const FLAG_OF: Record<string, string> = {
  maxNewTokens: "--max-new-tokens", maxLength: "--max-length", doSample: "--do-sample", temperature: "--temperature",
  topK: "--top-k", topP: "--top-p", minP: "--min-p", repetitionPenalty: "--repetition-penalty", stopStrings: "--stop",
};

test("tsorch generate follows transformers' length, generation_config and precedence rules (every case its flags express)", async (t) => {
  for (const dir of Object.values(SOURCES)) {
    const skip = missing(dir);
    if (skip) return t.skip(skip);
  }
  // A flag beating generation_config.json for every flag, the length rules, and errors from either source.
  const names = new Set([
    "gc max_length 12, 1-token prompt", "gc max_length 12, prompt already 12 tokens", "explicit max_length beats gc max_length",
    "explicit max_new_tokens beats gc max_new_tokens", "max_new_tokens 0 is refused", "501-token prompt, max_new_tokens 64, 512 positions",
    "600-token prompt, default length is refused", "gpt2: 250 + 10 new tokens exceed n_positions", "gc temperature 0.0 without sampling is greedy",
    "explicit do_sample false beats gc sampling", "explicit temperature beats gc temperature", "explicit top_k beats gc top_k",
    "explicit top_p beats gc top_p", "explicit min_p beats gc min_p", "gc min_p 2 with sampling is refused",
    "explicit do_sample true beats gc do_sample false", "explicit repetition_penalty beats gc", "gc eos_token_id", "explicit stop_strings beat gc",
  ]);
  const cases = generationCases().filter((c) => names.delete(c.name));
  assert.deepEqual([...names], [], "cases missing from generation_reference.json");
  for (const c of cases) {
    const dir = caseModelDir(c);
    const r = await tsorch(["generate", "--model", dir, "--input-ids", (c.prompt as number[]).join(","), "--output", "json", "--seed", "7", ...cliFlags(c.kwargs)!]);
    if (c.error) {
      // A flag at fault is a usage error (exit 2); a generation_config.json value or the input, exit 1.
      const flagAtFault = /^`(max_new_tokens|temperature|top_k|top_p|min_p|penalty)`/.test(c.error.replace(/^ValueError: /, "")) &&
        Object.keys(c.kwargs).some((k) => c.error!.includes(`\`${k}\``) || (k === "repetition_penalty" && c.error!.includes("`penalty`")));
      assertError(r, flagAtFault ? 2 : 1, expectedError(c, (o) => FLAG_OF[o]), c.name);
      continue;
    }
    assert.equal(r.code, 0, `${c.name}: ${r.stderr}`);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out.new_token_ids, c.new_ids, c.name);
    assert.equal(out.finish_reason, c.finish_reason, c.name);
  }
});

test("bad flags: one-line errors naming the flag, exit 2, before the model is looked at", async () => {
  const gen = (...flags: string[]) => tsorch(["generate", "--model", "/nonexistent/model-folder", "--prompt", "Once", ...flags]);
  const cases: [string[], RegExp][] = [
    [["--max-new-tokens", "-1"], /--max-new-tokens must be a positive integer, got -1/],
    [["--max-new-tokens", "0"], /--max-new-tokens must be a positive integer, got 0/],
    [["--max-new-tokens", "many"], /--max-new-tokens expects an integer, got 'many'/],
    [["--max-length", "-5"], /--max-length must be a positive integer, got -5/],
    [["--do-sample", "--top-p", "-0.5"], /--top-p must be a number in \[0, 1\]/],
    [["--do-sample", "--top-p", "2"], /--top-p must be a number in \[0, 1\]/],
    [["--do-sample", "--temperature", "0"], /--temperature must be a strictly positive number/],
    [["--do-sample", "--top-k", "-3"], /--top-k must be a non-negative integer/],
    [["--do-sample", "--min-p", "1.5"], /--min-p must be a number in \[0, 1\]/],
    [["--repetition-penalty", "-1"], /--repetition-penalty must be a strictly positive number/],
    [["--cache", "paged"], /--cache must be 'dynamic' or 'static', got "paged"/],
    [["--stop", ""], /--stop must be a non-empty string/],
    [["--top_p", "0.5"], /unknown option '--top_p'; did you mean '--top-p'\?/],
    [["--max_new_tokens", "5"], /unknown option '--max_new_tokens'; did you mean '--max-new-tokens'\?/],
  ];
  for (const [flags, re] of cases) assertError(await gen(...flags), 2, re, flags.join(" "));
});

test("a flag that is bad only with the model's generation_config.json is named before the weights load", async (t) => {
  const skip = missing(STORIES);
  if (skip) return t.skip(skip);
  // generation_config.json turns sampling on, and the weights file is garbage: only a check made
  // before the weights load can name the flag.
  const dir = caseModelDir({ name: "", model: "stories260K", config: {}, generation_config: { do_sample: true }, prompt: [1], attention_mask: null, kwargs: {}, tokenizer: false });
  unlinkSync(path.join(dir, "model.safetensors"));
  writeFileSync(path.join(dir, "model.safetensors"), "not a safetensors file");
  const gen = (...flags: string[]) => tsorch(["generate", "--model", dir, "--prompt", "Once", "--max-new-tokens", "4", ...flags]);
  assertError(await gen("--temperature", "0"), 2, /--temperature must be a strictly positive number/, "--temperature 0 while sampling");
  assertError(await gen("--temperature", "0", "--do-sample", "false"), 1, /model\.safetensors/, "--temperature 0 without sampling is accepted");
});

test("tsorch forward refuses inputs past learned position embeddings (transformers: index error), not past rope's max_position_embeddings", async (t) => {
  const skip = missing(SOURCES.gpt2);
  if (skip) return t.skip(skip);
  const ids = (n: number) => Array.from({ length: n }, () => "5").join(",");
  const r = await tsorch(["forward", "--model", SOURCES.gpt2, "--input-ids", ids(257), "--output", "json"]);
  assertError(r, 1, /257 tokens, more than the 256 positions of GPT2LMHeadModel's learned position embeddings \(n_positions\)/, "gpt2 forward");
  const ok = await tsorch(["forward", "--model", SOURCES.gpt2, "--input-ids", ids(256), "--output", "json"]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(JSON.parse(ok.stdout).logits.length, 256);
  if (missing(STORIES)) return;
  // Rotary positions have no such limit (the 600-token generation case checks the values past 512).
  const rope = await tsorch(["forward", "--model", STORIES, "--input-ids", ids(520), "--output", "json"]);
  assert.equal(rope.code, 0, rope.stderr);
  assert.equal(JSON.parse(rope.stdout).logits.length, 520);
});
