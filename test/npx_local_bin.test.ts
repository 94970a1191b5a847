/**
 * `npx tsorch` inside the repository. npm (>= 7) runs a package's own bin by linking the package
 * into npx's cache, which runs its `prepare` and `install` scripts; those must find the build
 * current and leave it alone (tsc -b, node-gyp-build) instead of recompiling the TypeScript and
 * the native addon on a user's first command.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, statSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { ROOT } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const run = promisify(execFile);

test("npx tsorch in the repository runs the built CLI and rebuilds nothing", async () => {
  const outputs = ["build/Release/tsorch_cpu.node", "dist/src/cli/main.js", "dist/tsconfig.tsbuildinfo"].map((f) => path.join(ROOT, f));
  const mtimes = () => outputs.map((f) => statSync(f).mtimeMs);
  const before = mtimes();
  const cache = tempDir("tsorch-npx-cache-"); // a fresh npx cache: the first-run path
  try {
    const { stdout, stderr } = await run("npm", ["exec", "--offline", "--cache", cache, "--loglevel", "info", "--", "tsorch", "--help"],
      { cwd: ROOT, maxBuffer: 1 << 24 });
    assert.match(stdout, /^usage: tsorch <command>/);
    assert.doesNotMatch(stderr, /node-gyp rebuild|gyp info/, "the addon must not be rebuilt");
    assert.deepEqual(mtimes(), before, "addon and compiled TypeScript untouched");
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

test("package-lock.json is current: the root entry matches package.json (bin, dependencies)", () => {
  const read = (f: string) => JSON.parse(readFileSync(path.join(ROOT, f), "utf8"));
  const pkg = read("package.json"), root = read("package-lock.json").packages[""];
  for (const key of ["name", "version", "bin", "dependencies", "devDependencies"]) assert.deepEqual(root[key], pkg[key], key);
  assert.ok(statSync(path.join(ROOT, pkg.bin.tsorch)).mode & 0o100, "the bin is executable");
});
