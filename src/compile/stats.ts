/**
 * torch.compiler's counters (as torch._dynamo.utils.counters): graphs compiled, calls served from
 * the cache, graph breaks, and why each recompile happened. TSORCH_LOGS (comma-separated, as
 * PyTorch's TORCH_LOGS) prints as it goes: "recompiles" names the failed guard of each recompile,
 * "graph_breaks" each break, "graph" the size of each compiled graph.
 */
export interface CompilerStats {
  /** Graphs captured and compiled (first calls and recompiles). */
  compiles: number;
  /** Calls replayed from a compiled graph without tracing. */
  cacheHits: number;
  /** Captures that hit a graph break (that call and later same-key calls run eagerly). */
  graphBreaks: number;
  /** One line per recompile: the function and the guard that failed. */
  recompileReasons: string[];
  /** One line per graph break: the function and what broke it. */
  graphBreakReasons: string[];
}

const counters: CompilerStats = { compiles: 0, cacheHits: 0, graphBreaks: 0, recompileReasons: [], graphBreakReasons: [] };

/** A snapshot of the counters since start or the last reset(). */
export function stats(): CompilerStats {
  return { ...counters, recompileReasons: [...counters.recompileReasons], graphBreakReasons: [...counters.graphBreakReasons] };
}

let generation = 0;

/** @internal Bumped by reset(): compiled functions drop their graphs when it changes. */
export function cacheGeneration(): number {
  return generation;
}

/** Zero the counters and drop every compiled graph (torch.compiler.reset): the next call of each compiled function compiles afresh. */
export function reset(): void {
  generation++;
  counters.compiles = counters.cacheHits = counters.graphBreaks = 0;
  counters.recompileReasons = [];
  counters.graphBreakReasons = [];
}

function logging(topic: string): boolean {
  return ((typeof process === "undefined" ? "" : process.env.TSORCH_LOGS) ?? "").split(",").map((s) => s.trim()).includes(topic);
}

/** @internal Counting and logging, for compile.ts. */
export const record = {
  compile(): void { counters.compiles++; },
  hit(): void { counters.cacheHits++; },
  recompile(name: string, reason: string): void {
    const line = `${name}: ${reason}`;
    counters.recompileReasons.push(line);
    if (logging("recompiles")) console.error(`[tsorch.compile] Recompiling function ${name}\n    triggered by the following guard failure: ${reason}`);
  },
  graphBreak(name: string, reason: string): void {
    const line = `${name}: ${reason}`;
    counters.graphBreaks++;
    counters.graphBreakReasons.push(line);
    if (logging("graph_breaks")) console.error(`[tsorch.compile] Graph break in ${name}: ${reason} (this call and later calls with the same guards run eagerly)`);
  },
  graph(name: string, info: { nodes: number; deadNodes: number; fusedNodes: number; plannedBytes: number; capturedBytes: number }): void {
    if (logging("graph")) console.error(`[tsorch.compile] ${name}: ${info.nodes} kernel calls (${info.deadNodes} dead removed, ${info.fusedNodes} fused away), intermediates ${info.capturedBytes} -> ${info.plannedBytes} bytes`);
  },
};
