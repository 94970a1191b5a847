/** Test helpers that rewrite a checkpoint into another Hub layout (tensors as RawTensor maps). */
import type { RawTensor } from "../../src/hub/index.js";

/** A float32 tensor of `shape` holding `bytes`. */
export function raw(name: string, shape: number[], bytes: Uint8Array): RawTensor {
  return { name, dtype: "float32", shape, bytes };
}

/** The checkpoint with every fused `experts.{gate_up_proj,down_proj}` split into `experts.N.{gate,up,down}_proj.weight`. */
export function splitExperts(weights: Map<string, RawTensor>): Map<string, RawTensor> {
  const out = new Map<string, RawTensor>();
  for (const [name, t] of weights) {
    const m = /^(.*\.experts)\.(gate_up_proj|down_proj)$/.exec(name);
    if (!m) {
      out.set(name, t);
      continue;
    }
    const [E, rows, cols] = t.shape, per = rows * cols * 4;
    for (let e = 0; e < E; e++) {
      const b = t.bytes.subarray(e * per, (e + 1) * per);
      if (m[2] === "down_proj") out.set(`${m[1]}.${e}.down_proj.weight`, raw(`${m[1]}.${e}.down_proj.weight`, [rows, cols], b));
      else {
        out.set(`${m[1]}.${e}.gate_proj.weight`, raw(`${m[1]}.${e}.gate_proj.weight`, [rows / 2, cols], b.subarray(0, per / 2)));
        out.set(`${m[1]}.${e}.up_proj.weight`, raw(`${m[1]}.${e}.up_proj.weight`, [rows / 2, cols], b.subarray(per / 2)));
      }
    }
  }
  return out;
}
