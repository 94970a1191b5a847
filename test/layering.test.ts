/**
 * The layering of ../shared/DESIGN.md, checked on the imports of every file under src/: a layer
 * imports only from itself and the layers below it (devices/ nothing above it, tensor/ no nn/ or
 * higher, nn/ nothing from transformers/, …).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { ROOT } from "./helpers/shared.js";

const SRC = path.join(ROOT, "src");

/** DESIGN.md's layers, bottom first. conformance/ (the op checks over tensor/) sits beside nn/;
 * "index" is src/index.ts, the public entry point. One change from DESIGN.md's drawing: hub/ sits
 * just below kernels/, because kernel repositories are fetched through the same Hugging Face cache
 * and download code as models (issue 12); hub/ itself imports only devices/ and tensor/. */
const RANK: Record<string, number> = {
  devices: 0, tensor: 1, nn: 2, conformance: 2, compile: 3, distributed: 4, hub: 4.5, kernels: 5,
  transformers: 7, diffusers: 8, serve: 9, cli: 10, browser: 11, index: 11,
};

function layerOf(file: string): string {
  const rel = path.relative(SRC, file).split(path.sep);
  return rel.length === 1 ? path.basename(rel[0], ".ts") : rel[0];
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []);
}

/** Relative module specifiers of static imports, re-exports and dynamic imports. */
function imports(text: string): string[] {
  const found = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.[^"']+)["']/g)].map((m) => m[1]);
  return [...new Set(found)];
}

test("every layer imports only from itself and the layers below it (DESIGN.md)", () => {
  const violations: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const from = layerOf(file);
    assert.ok(from in RANK, `${path.relative(ROOT, file)}: layer '${from}' is not in DESIGN.md's order; add it to RANK`);
    for (const spec of imports(readFileSync(file, "utf8"))) {
      const to = layerOf(path.resolve(path.dirname(file), spec.replace(/\.js$/, ".ts")));
      if (to !== from && !(RANK[to] < RANK[from])) violations.push(`${path.relative(ROOT, file)} (${from}) imports ${spec} (${to})`);
    }
  }
  assert.deepEqual(violations, []);
});

test("the import scan sees what the rule forbids", () => {
  const specs = imports(`import type { Tensor } from "../../tensor/tensor.js";\nexport * from "./a.js";\nconst m = await import("../nn/x.js");`);
  assert.deepEqual(specs, ["../../tensor/tensor.js", "./a.js", "../nn/x.js"]);
  const webgpuKernel = path.join(SRC, "devices/webgpu/kernels/x.ts");
  assert.equal(layerOf(path.resolve(path.dirname(webgpuKernel), "../../../tensor/tensor.ts")), "tensor");
  assert.equal(layerOf(path.join(SRC, "index.ts")), "index");
});
