/**
 * compile/: trace eager code into a graph, optimise it, and replay it per guard key.
 * `compile` is torch.compile; `compiler` is torch.compiler (stats, reset).
 */
export { compile, type CompileOptions, type Forward } from "./compile.js";
export * as compiler from "./compiler.js";
export type { CompilerStats } from "./stats.js";
