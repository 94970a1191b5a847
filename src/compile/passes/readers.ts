/**
 * How many graph nodes read each storage (a node reading one storage twice counts once): the
 * fusion passes fold a producer into its consumer only where the consumer is its sole reader.
 */
import type { Storage } from "../../devices/device.js";
import type { GraphNode } from "../capture.js";

/** Storage → number of distinct nodes of `nodes` that read it. */
export function readerCounts(nodes: readonly GraphNode[]): Map<Storage, number> {
  const readers = new Map<Storage, number>();
  for (const n of nodes) for (const s of new Set(n.reads)) readers.set(s, (readers.get(s) ?? 0) + 1);
  return readers;
}
