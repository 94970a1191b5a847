/**
 * CI cannot skip: every test that reads ../shared finds it through test/helpers/shared.ts and
 * checks it with `missing()`, which skips locally and fails under CI=true. Checked by reading the
 * test sources, and by running test files with TSORCH_SHARED pointing at a folder that does not exist.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { ROOT } from "./helpers/shared.js";

const run = promisify(execFile);
const TESTS = path.join(ROOT, "test");

function sources(): { file: string; text: string }[] {
  const dirs = [TESTS, path.join(TESTS, "helpers")];
  return dirs.flatMap((d) => readdirSync(d).filter((f) => f.endsWith(".ts")).map((f) => ({ file: path.join(d, f), text: readFileSync(path.join(d, f), "utf8") })));
}

test("no test builds a ../shared path itself; those that use the fixture paths call missing()", () => {
  const own = path.join(TESTS, "helpers/shared.ts");
  for (const { file, text } of sources()) {
    if (file === own) continue;
    const rel = path.relative(ROOT, file);
    assert.doesNotMatch(text, /(join|resolve)\([^)]*["'`][^"'`]*\.\.\/shared/, `${rel} builds a ../shared path: use SHARED/STORIES/TINY from test/helpers/shared.ts`);
    const usesFixtures = /import\s*{[^}]*\b(SHARED|STORIES|TINY)\b[^}]*}\s*from\s*"\.\/(helpers\/)?shared\.js"/.test(text);
    if (usesFixtures) assert.match(text, /\bmissing\b/, `${rel} uses ../shared fixtures without checking them with missing()`);
  }
});

/** Run one compiled test file with ../shared replaced by a folder that does not exist. */
async function runWithoutShared(file: string, ci: boolean): Promise<{ code: number; out: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, TSORCH_SHARED: "/nonexistent/tsorch-shared", CI: ci ? "true" : "" };
  delete env.NODE_TEST_CONTEXT; // a top-level run, not a subtest stream of this one
  try {
    const { stdout, stderr } = await run(process.execPath, ["--test", "--test-reporter=tap", path.join(ROOT, "dist/test", file)], { env, maxBuffer: 1 << 24 });
    return { code: 0, out: stdout + stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, out: err.stdout + err.stderr };
  }
}

for (const file of ["hub_config.test.js", "hub_download.test.js", "hub_safetensors.test.js", "llama.test.js"]) {
  test(`${file} without ../shared: skips locally, fails under CI=true`, async () => {
    const local = await runWithoutShared(file, false);
    assert.equal(local.code, 0, local.out);
    assert.match(local.out, /# skipped [1-9]/);
    const ci = await runWithoutShared(file, true);
    assert.notEqual(ci.code, 0, `${file} passed under CI=true without ../shared:\n${ci.out}`);
    assert.match(ci.out, /CI must run with \.\.\/shared/);
  });
}
