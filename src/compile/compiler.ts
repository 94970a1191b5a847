/** torch.compiler: the compile counters (see ./stats.ts). */
export { stats, reset, type CompilerStats } from "./stats.js";
