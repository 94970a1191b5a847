/**
 * The conformance suite (src/conformance) passes completely on every device: each op of the tensor
 * API over shapes, views, dtypes and edge values against float64 references.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";
import { test } from "node:test";
import { promisify } from "node:util";
import { formatReport, runConformance } from "../src/conformance/runner.js";
import { openDevice } from "../src/devices/registry.js";
import "../src/index.js";
import { CLI } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

const run = promisify(execFile);

test("conformance: 100% on cpu", async () => {
  const report = await runConformance(await openDevice("cpu"));
  assert.ok(report.ops.length >= 60, `only ${report.ops.length} ops covered`);
  assert.equal(report.passRate, 100, formatReport(report));
});

test("conformance: 100% on webgpu", async (t) => {
  const dev = await webgpuOrSkip(t);
  if (!dev) return;
  const report = await runConformance(dev);
  assert.equal(report.passRate, 100, formatReport(report));
});

test("conformance: an op filter that selects nothing is an error naming it, from the API and the CLI", async () => {
  const cpu = await openDevice("cpu");
  await assert.rejects(runConformance(cpu, "nosuchop"), /--op 'nosuchop' selects no conformance case; ops: .*\badd\b/);
  const r = await run(process.execPath, [CLI, "conformance", "--op", "nosuchop"], { cwd: tmpdir() }).then(() => null, (e) => e);
  assert.ok(r, "tsorch conformance --op nosuchop must fail");
  assert.match(r.stderr, /^tsorch: error: --op 'nosuchop' selects no conformance case/);
  const one = await runConformance(cpu, "softmax");
  assert.ok(one.cases > 0 && one.ops.every((o) => o.op.includes("softmax")));
});
