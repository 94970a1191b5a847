#!/usr/bin/env node
// Rebuild every hub-kernels/<name>/build/cpu-wasm/*.wasm from the .wat beside it (wabt, SIMD on).
// The .wasm files are committed, so loading a kernel never needs this; run it after editing a .wat:
//   node hub-kernels/build-wasm.mjs
import { readdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import wabtInit from "wabt";

const root = dirname(fileURLToPath(import.meta.url));
const wabt = await wabtInit();
for (const kernel of readdirSync(root)) {
  const dir = join(root, kernel, "build", "cpu-wasm");
  if (!existsSync(dir)) continue;
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".wat"))) {
    const mod = wabt.parseWat(f, readFileSync(join(dir, f), "utf8"), { simd: true });
    mod.validate();
    const { buffer } = mod.toBinary({});
    writeFileSync(join(dir, f.replace(/\.wat$/, ".wasm")), buffer);
    console.log(`${kernel}/build/cpu-wasm/${f.replace(/\.wat$/, ".wasm")}: ${buffer.length} bytes`);
  }
}
