/**
 * The conformance suite (src/conformance) passes completely on every device: each op of the tensor
 * API over shapes, views, dtypes and edge values against float64 references.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { formatReport, runConformance } from "../src/conformance/runner.js";
import { openDevice } from "../src/devices/registry.js";
import "../src/index.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

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
