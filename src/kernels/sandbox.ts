/**
 * The sandbox rule: tsorch loads only code that runs in a sandbox — WGSL (the GPU's shader
 * sandbox) and WebAssembly (V8, with no imports but its memory). A kernel repository that ships
 * native code (shared libraries, Node addons, executables) or a build variant of another kind is
 * refused as a whole, before anything in it is read.
 */
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { VARIANTS } from "./metadata.js";

/** Extensions of native code, refused wherever they appear in a repository. */
const NATIVE = /\.(so(\.\d+)*|node|dll|dylib|exe|a|lib|o|pyd)$/i;

/** Every file below `dir` (relative paths, "/"-separated), skipping dot-folders such as .git. */
export function listFiles(dir: string, base = dir): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const p = join(dir, name);
    if (name.startsWith(".") && statSync(p).isDirectory()) return [];
    return statSync(p).isDirectory() ? listFiles(p, base) : [relative(base, p).split("\\").join("/")];
  });
}

/**
 * Check kernel repository folder `dir` (named `what` in messages) against the sandbox rule.
 * Throws "kernel X ships native code (build/…/foo.so); tsorch loads only WGSL and WebAssembly
 * kernels" or "kernel X has build variant Y; tsorch loads only webgpu-wgsl, cpu-wasm".
 */
export function checkSandbox(what: string, dir: string): void {
  const files = listFiles(dir);
  const native = files.filter((f) => NATIVE.test(f));
  if (native.length > 0) {
    throw new Error(`kernel ${what} ships native code (${native.join(", ")}); tsorch loads only WGSL and WebAssembly kernels (the sandbox rule)`);
  }
  const variants = new Set(files.filter((f) => f.startsWith("build/")).map((f) => f.split("/")[1]));
  const other = [...variants].filter((v) => !(VARIANTS as string[]).includes(v));
  if (other.length > 0) {
    throw new Error(`kernel ${what} has build variant${other.length > 1 ? "s" : ""} ${other.join(", ")}; tsorch loads only ${VARIANTS.join(", ")} (the sandbox rule: WGSL and WebAssembly only)`);
  }
  if (variants.size === 0) throw new Error(`kernel ${what} has no build/<variant>/ folder (expected one of ${VARIANTS.join(", ")})`);
}
