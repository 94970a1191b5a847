/**
 * The memory plan: intermediates (storages that live only inside one call) are packed into a few
 * buffers by liveness, so a replay allocates nothing for them. Each intermediate lives from the
 * first node that touches it to the last; it takes the smallest free buffer that fits (a buffer is
 * free once its previous tenant's last node has run; never shared within one node), else a new one.
 */
import type { Device, Storage } from "../../devices/device.js";
import type { GraphNode } from "../capture.js";

export interface MemoryPlan {
  /** Intermediate storage -> the planned buffer that replaces it. */
  readonly assignment: Map<Storage, Storage>;
  /** Bytes of the planned buffers, and of the intermediates they replace. */
  readonly plannedBytes: number;
  readonly capturedBytes: number;
}

export function planMemory(nodes: readonly GraphNode[], temporary: ReadonlySet<Storage>, device: Device): MemoryPlan {
  const first = new Map<Storage, number>(), last = new Map<Storage, number>();
  nodes.forEach((n, i) => {
    for (const s of [...n.reads, ...n.writes]) {
      if (!temporary.has(s)) continue;
      if (!first.has(s)) first.set(s, i);
      last.set(s, i);
    }
  });
  const buffers: { storage: Storage; freeAfter: number }[] = [];
  const assignment = new Map<Storage, Storage>();
  let capturedBytes = 0;
  for (const s of [...first.keys()].sort((a, b) => first.get(a)! - first.get(b)!)) {
    const start = first.get(s)!;
    capturedBytes += s.nbytes;
    let best: (typeof buffers)[number] | undefined;
    for (const b of buffers) {
      if (b.freeAfter < start && b.storage.nbytes >= s.nbytes && (!best || b.storage.nbytes < best.storage.nbytes)) best = b;
    }
    if (!best) buffers.push((best = { storage: device.allocate(s.nbytes), freeAfter: 0 }));
    best.freeAfter = last.get(s)!;
    assignment.set(s, best.storage);
  }
  return { assignment, plannedBytes: buffers.reduce((a, b) => a + b.storage.nbytes, 0), capturedBytes };
}
