/**
 * Gather kernels: embedding lookup (rows of a table in any float dtype at int32/int64 ids).
 * Ids live on the GPU, so an id outside [0, V) cannot throw when the op is called: the kernel
 * writes zeros for that row and records the id in the device's status block, and the next read
 * of any tensor (a sync point) throws the RangeError.
 */
import type { KernelSignatures } from "../../kernels.js";
import { numel, type TensorView } from "../../view.js";
import { STATUS_EMBEDDING } from "../device.js";
import { grid } from "../dispatch.js";
import { bufferOf, deviceOf } from "./common.js";
import { binding, entry, LIBRARY, loader } from "./wgsl.js";

const WG = 256;

function embedding(table: TensorView, ids: TensorView, out: TensorView): void {
  const dev = deviceOf(out);
  const [V, dim] = table.shape;
  const wide = ids.dtype === "int64";
  const prog = dev.dispatcher.program(`embedding:${table.dtype}:${ids.dtype}`, ["read", "read", "write", "write"], () => `${LIBRARY}
${binding(1, "t", "read")}${loader("t", table.dtype)}
@group(0) @binding(2) var<storage, read> I: array<u32>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
${entry(WG)} {
  let i = group_id(wid, nwg) * ${WG}u + lid;
  if (i >= pu(0u)) { return; }
  let dim = pu(1u);
  let V = pu(2u);
  let row = i / dim;
  let at = pu(4u) + row;
  let lo = I[${wide ? "2u * at" : "at"}];
  let hi = ${wide ? "I[2u * at + 1u]" : "select(0u, 0xffffffffu, (lo >> 31u) == 1u)"};
  if (hi != 0u || lo >= V) {
    if (atomicExchange(&status[0], ${STATUS_EMBEDDING}u) == 0u) {
      atomicStore(&status[1], lo);
      atomicStore(&status[2], hi);
      atomicStore(&status[3], V);
    }
    Y[pu(5u) + i] = 0.0;
    return;
  }
  Y[pu(5u) + i] = ld_t(pu(3u) + lo * dim + i % dim);
}`);
  dev.dispatcher.dispatch(prog, [bufferOf(table), bufferOf(ids), bufferOf(out), dev.status],
    [numel(out), dim, V, table.offset, ids.offset, out.offset], grid(numel(out), WG));
}

export const gatherKernels: Pick<KernelSignatures, "embedding"> = { embedding };
