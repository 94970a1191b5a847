/**
 * Running a `webgpu-wgsl` op: each dispatch of its metadata is compiled once (the repository's
 * WGSL after a prelude giving `pu(i)`/`pf(i)` parameter reads and a `<input>_DTYPE` constant per
 * input) and recorded on the webgpu device's dispatcher like a built-in kernel. Binding 0 is the
 * parameter block; bindings 1… are the tensors the dispatch lists, every one as array<u32>
 * (read-write where the dispatch `writes` them, else read-only; inputs are never written). Element offsets are passed as parameters
 * (offset(x)): views are bound whole, as by the built-in kernels.
 */
import { fbits } from "../devices/webgpu/dispatch.js";
import { bufferOf, deviceOf } from "../devices/webgpu/kernels/common.js";
import { empty } from "../tensor/ops.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { evaluate } from "./expr.js";
import { bindCall, DTYPE_CODE, type OpSpec } from "./metadata.js";

const PRELUDE = `struct Params { v: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
fn pu(i: u32) -> u32 { return P.v[i >> 2u][i & 3u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }
`;

/** Run op `opName` (`op`) of kernel `kernel` (its id keys the compiled pipelines) on webgpu tensors. */
export function runWgsl(kernel: string, id: string, opName: string, op: OpSpec, sources: (file: string) => string, args: (Tensor | number)[]): Record<string, Tensor> {
  const call = bindCall(kernel, opName, op, args);
  const tensors = Object.values(call.inputs);
  if (tensors.some((t) => t.device.type !== "webgpu")) {
    throw new Error(`kernel ${kernel}: op ${opName} (webgpu-wgsl) got tensors on ${tensors.map((t) => t.device.name).join(", ")}`);
  }
  const dev = deviceOf(tensors[0]);
  const outputs: Record<string, Tensor> = {};
  tidy(() => {
    for (const [n, shape] of Object.entries(call.outputs)) outputs[n] = empty(shape, op.outputs[n].dtype, dev);
    const bound: Record<string, Tensor> = { ...call.inputs, ...outputs };
    for (const [n, t] of Object.entries(op.temps ?? {})) bound[n] = empty([Math.max(1, evaluate(t.size, call.scope))], t.dtype, dev);
    const tensorOf = (n: string) => bound[n] ?? (() => { throw new Error(`kernel ${kernel}: op ${opName}: a dispatch binds unknown tensor '${n}'`); })();
    call.scope.fns.offset = (n) => tensorOf(n).offset;
    const dtypes = Object.entries(call.inputs).map(([n, t]) => `const ${n}_DTYPE: u32 = ${DTYPE_CODE[t.dtype]}u;`).join("\n");
    op.dispatches!.forEach((d, i) => {
      const groups = d.workgroups.map((e) => evaluate(e, call.scope)) as [number, number, number];
      if (groups.some((g) => g === 0)) return;
      if (groups.some((g) => g > 65535)) throw new RangeError(`kernel ${kernel}: op ${opName}: dispatch ${i} needs ${groups} workgroups (at most 65535 per dimension)`);
      const access = d.bindings.map((n) => ((d.writes ? d.writes.includes(n) : !(n in call.inputs)) ? "write" : "read") as "read" | "write");
      const key = `hub:${id}:${opName}:${i}:${Object.values(call.inputs).map((t) => t.dtype).join(",")}`;
      const prog = dev.dispatcher.program(key, access, () => `${PRELUDE}${dtypes}\n${sources(d.source)}`);
      const params = d.params.map((p) => (p.startsWith("f32:") ? fbits(evaluate(p.slice(4), call.scope)) : evaluate(p, call.scope) >>> 0));
      dev.dispatcher.dispatch(prog, d.bindings.map((n) => bufferOf(tensorOf(n))), params, groups);
    });
    return Object.values(outputs);
  });
  return outputs;
}
