/**
 * Loads the cpu device's native addon in Node (build/Release/tsorch_cpu.node, built by node-gyp at
 * `npm install`). Selected for `#cpu-addon` by package.json "imports" everywhere but in browsers.
 */
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import * as path from "node:path";

/**
 * The addon's exports (typed by ./native.ts); the file TSORCH_CPU_ADDON names instead, if set
 * (`npm run test:sanitize` points it at the sanitizer build). Throws a clear error when it is
 * missing or fails to load.
 */
export function loadCpuAddon(): unknown {
  const require = createRequire(import.meta.url);
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
  const file = process.env.TSORCH_CPU_ADDON || path.join(root, "build", "Release", "tsorch_cpu.node");
  try {
    return require(file);
  } catch (e) {
    throw new Error(
      `the cpu device's native addon is missing or failed to load (${file}): run \`npm install\` ` +
        `(it builds with node-gyp; needs g++, make and python3; after changing the C++, ` +
        `\`npm install --build-from-source\`). Cause: ${(e as Error).message}`,
    );
  }
}
