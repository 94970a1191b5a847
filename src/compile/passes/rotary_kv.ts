/**
 * Rotary + KV-write fusion: a key's `rotary` whose result only the next node, a `pagedKVWrite`,
 * reads (the static cache's write of the new keys and values), optionally preceded by the query's
 * `rotary` with the same cos/sin, becomes one `rotaryKVWrite` kernel call (devices/kernels.ts):
 * the rotated key goes straight into the pool. Runs only on devices that register `rotaryKVWrite`.
 */
import type { Storage } from "../../devices/device.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";

type RotaryArgs = [TensorView, TensorView, TensorView, TensorView];

const dense = (v: TensorView) => isContiguous(v) && v.dtype === "float32";

const sameView = (a: TensorView, b: TensorView) =>
  a.storage === b.storage && a.offset === b.offset && `${a.shape}` === `${b.shape}` && `${a.strides}` === `${b.strides}`;

function rotaryOf(n: GraphNode | undefined): RotaryArgs | null {
  if (n?.op !== "rotary") return null;
  const a = n.args as RotaryArgs;
  return a.every(dense) && a[0].shape.length === 4 ? a : null;
}

/** The nodes with rotary + KV writes fused (see the file comment); `temporary`: storages that die with the call. */
export function fuseRotaryKVWrite(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const readers = new Map<Storage, number>();
  for (const n of nodes) for (const s of n.reads) readers.set(s, (readers.get(s) ?? 0) + 1);
  const out: GraphNode[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const key = rotaryOf(nodes[i]), write = nodes[i + 1];
    if (key && write?.op === "pagedKVWrite") {
      const [k, cos, sin, ko] = key;
      const [kw, v, kc, vc, slots] = write.args as [TensorView, TensorView, TensorView, TensorView, TensorView];
      const ok = kw.storage === ko.storage && kw.offset === ko.offset && numel(kw) === numel(ko) && dense(kw) && dense(v)
        && temporary.has(ko.storage) && !outputs.has(ko.storage) && readers.get(ko.storage) === 1
        && ![k, v, cos, sin, slots].some((t) => t.storage === kc.storage || t.storage === vc.storage);
      if (ok) {
        const prev = out.length > 0 ? rotaryOf(out.at(-1)) : null;
        const query = prev && sameView(prev[1], cos) && sameView(prev[2], sin) && prev[0].shape[3] === k.shape[3]
          && ![k, v, cos, sin, slots, kc, vc].some((t) => t.storage === prev[3].storage)
          && ![ko, kc, vc].some((t) => t.storage === prev[0].storage) ? prev : null;
        if (query) out.pop();
        const [q, qo] = query ? [query[0], query[3]] : [null, null];
        out.push({
          op: "rotaryKVWrite", args: [q, qo, k, v, cos, sin, kc, vc, slots],
          reads: [...(q ? [q.storage] : []), k.storage, v.storage, cos.storage, sin.storage, slots.storage],
          writes: [...(qo ? [qo.storage] : []), kc.storage, vc.storage],
        });
        i++;
        continue;
      }
    }
    out.push(nodes[i]);
  }
  return out;
}
