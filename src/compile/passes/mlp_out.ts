/**
 * MLP fusion: a `linearGroup` with an epilogue (a gated MLP's norm, gate/up projections and
 * SiLU(gate) * up, made by the linear grouping) whose result only the next node reads, a
 * `linearAdd` (the down projection and the residual add, made by the epilogue fusion) taking it as
 * its input, becomes one `linearGroupLinearAdd` kernel call (devices/kernels.ts): a decoder
 * layer's whole MLP in one dispatch. Runs after the linear grouping, only on devices that register
 * `linearGroupLinearAdd`.
 */
import type { Storage } from "../../devices/device.js";
import type { FusedStep, LinearGroupNorm } from "../../devices/kernels.js";
import { isContiguous, numel, type TensorView } from "../../devices/view.js";
import type { GraphNode } from "../capture.js";
import { readerCounts } from "./readers.js";

const dense = (v: TensorView, n: number) => isContiguous(v) && numel(v) === n && v.dtype === "float32";

type GroupArgs = [TensorView, LinearGroupNorm | null, TensorView[], TensorView[], readonly FusedStep[] | null | undefined];
type LinearAddArgs = [TensorView, TensorView, TensorView | null, TensorView, TensorView];

/** The nodes with MLPs fused (see the file comment); `temporary`: storages that die with the call. */
export function fuseMlpOut(nodes: readonly GraphNode[], outputs: ReadonlySet<Storage>, temporary: ReadonlySet<Storage>): GraphNode[] {
  const readers = readerCounts(nodes);
  const out: GraphNode[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i], next = nodes[i + 1];
    if (n.op === "linearGroup" && next?.op === "linearAdd") {
      const [x, norm, ws, [h], epilogue] = n.args as GroupArgs;
      const [hx, w, bias, residual, y] = next.args as LinearAddArgs;
      const [M, I] = [x.shape[0], ws[0].shape[0]];
      const ok = !!epilogue && hx.storage === h.storage && hx.offset === h.offset && hx.shape.length === 2 && hx.shape[0] === M && hx.shape[1] === I
        && dense(hx, M * I) && dense(h, M * I) && temporary.has(h.storage) && !outputs.has(h.storage) && readers.get(h.storage) === 1
        && ![x.storage, norm?.weight.storage, ...ws.map((v) => v.storage)].includes(y.storage);
      if (ok) {
        out.push({
          op: "linearGroupLinearAdd", args: [x, norm, ws, epilogue, w, bias, residual, y],
          reads: [...n.reads, ...next.reads.filter((s) => s !== h.storage)], writes: [y.storage],
        });
        i++;
        continue;
      }
    }
    out.push(n);
  }
  return out;
}
