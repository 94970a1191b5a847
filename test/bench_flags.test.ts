/** `npm run bench` (dist/bench/main.js): flags are validated before any work, and the report's
 * thread count is the cpu pool's real size (an explicit --threads wins over TSORCH_NUM_THREADS). */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { ROOT } from "./helpers/shared.js";

const run = promisify(execFile);
const BENCH = path.join(ROOT, "dist/bench/main.js");

async function bench(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BENCH, ...args], { env: { ...process.env, ...env } });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

test("bench: bad flags are one-line usage errors (exit 2) before anything runs", async () => {
  const cases: [string[], RegExp][] = [
    [["--threads", "0"], /--threads expects a positive integer, got '0'/],
    [["--threads", "two"], /--threads expects a positive integer, got 'two'/],
    [["--device", "tpu"], /--device must be cpu or webgpu, got 'tpu'/],
    [["--model", "/nonexistent/bench-model"], /--model: no such folder: \/nonexistent\/bench-model/],
    [["--peer-python", "python3"], /--peer-python needs --model or --pipeline/],
    [["--steps", "2"], /--steps and --sizes need --pipeline/],
    [["--pipeline", "/nonexistent/bench-pipeline"], /--pipeline: no such folder: \/nonexistent\/bench-pipeline/],
    [["--treads", "2"], /Unknown option '--treads'/],
  ];
  for (const [args, pattern] of cases) {
    const r = await bench(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stdout, "");
    const [first] = r.stderr.split("\n");
    assert.match(first, /^bench: error: /);
    assert.match(first, pattern);
  }
});

test("bench: the reported thread count is the one used (TSORCH_NUM_THREADS, overridden by --threads)", async () => {
  const fromEnv = await bench([], { TSORCH_NUM_THREADS: "3" });
  assert.equal(fromEnv.code, 0, fromEnv.stderr);
  assert.equal(JSON.parse(fromEnv.stdout).threads, 3);
  const fromFlag = await bench(["--threads", "1"], { TSORCH_NUM_THREADS: "3" });
  assert.equal(fromFlag.code, 0, fromFlag.stderr);
  assert.equal(JSON.parse(fromFlag.stdout).threads, 1);
});
