/**
 * Dead-code elimination: keep a node when something observable depends on what it writes — a
 * storage the graph returns, a storage that outlives the call (an input or a captured tensor such
 * as a KV cache: a mutation), or a storage a later kept node reads. Walks the nodes backwards.
 */
import type { Storage } from "../../devices/device.js";
import type { GraphNode } from "../capture.js";

/** The nodes to keep, in order. `temporary` holds the storages that die with the call. */
export function eliminateDeadCode(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const needed = new Set<Storage>(outputs);
  const kept: GraphNode[] = [];
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i];
    if (!n.writes.some((s) => needed.has(s) || !temporary.has(s))) continue;
    kept.push(n);
    for (const s of n.reads) needed.add(s);
  }
  return kept.reverse();
}
