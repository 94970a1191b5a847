/**
 * The conformance suite's rule for devices that flush float32 subnormals (Device.flushesSubnormals
 * = "may"): webgpu, where the WGSL spec (§ Floating Point Evaluation, gpuweb/gpuweb wgsl/index.bs)
 * says "Any inputs or outputs of operations listed in [Floating Point Accuracy] may be flushed to
 * zero" and "Other operations are required to preserve subnormal numbers"; NVIDIA's driver
 * flushes (an H200: sqrt(1e-40) = 0, 0 / 1e-40 = NaN, 1e-40 == 0), lavapipe and cpu do not.
 *
 * On such a device, an element of a case that declares float arithmetic (Case.reference) passes
 * when it matches, within the case's tolerance, any of these references:
 *   - the exact float64 reference (as on every device);
 *   - Case.reference recomputed with any combination of the float32 inputs' subnormals flushed to
 *     sign-preserving zero (x / 1e-40 may become x / 0); it also flushes the float32 intermediates
 *     of an op's definition where it has stages (silu = x · σ(x));
 *   - any of the above with its result flushed: got ±0 where some value within the tolerance of
 *     that reference is subnormal.
 * Anything else still fails (a result that equals no reference, e.g. 1e-40 + 0 returning 5e-41).
 * Cases without Case.reference are data movement (copies, casts, where, gather: value conversions
 * and select are not in WGSL's accuracy table, so they must preserve subnormals): bit-exact on
 * every device; so is every device without the permission.
 */
import type { Expected } from "./case.js";
import { errorRatio, host, type HostTensor, type Tolerance, type Value } from "./reference.js";

/** The smallest normal float32; nonzero magnitudes below it are subnormal. */
export const MIN_NORMAL_F32 = 2 ** -126;

/** Whether `v` is a nonzero float32 subnormal (|v| < 2^-126); false for bigints, booleans and zeros. */
export function isSubnormalF32(v: Value): boolean {
  return typeof v === "number" && v !== 0 && Math.abs(v) < MIN_NORMAL_F32;
}

/** `v` with a float32 subnormal replaced by zero of the same sign; anything else unchanged. */
export function flushF32(v: number): number {
  return isSubnormalF32(v) ? (v < 0 ? -0 : 0) : v;
}

/** `t` with its float32 subnormals flushed (other dtypes unchanged). */
export function flushTensor(t: HostTensor): HostTensor {
  return t.dtype === "float32" ? host(t.dtype, t.shape, t.values.map((v) => flushF32(v as number))) : t;
}

/**
 * Every combination of `inputs` with the float32 inputs that hold subnormals flushed, the
 * unflushed one first (2^k sets for k such inputs).
 */
export function flushedInputSets(inputs: HostTensor[]): HostTensor[][] {
  const flushable = inputs.map((t, i) => (t.dtype === "float32" && t.values.some(isSubnormalF32) ? i : -1)).filter((i) => i >= 0);
  const sets: HostTensor[][] = [];
  for (let mask = 0; mask < 2 ** flushable.length; mask++) {
    sets.push(inputs.map((t, i) => {
      const bit = flushable.indexOf(i);
      return bit >= 0 && mask & (1 << bit) ? flushTensor(t) : t;
    }));
  }
  return sets;
}

/** The references a flushing device may match: Case.reference over every flushed input set. */
export function flushedReferences(reference: (inputs: HostTensor[]) => Expected[], inputs: HostTensor[]): Expected[][] {
  return flushedInputSets(inputs).map(reference);
}

/** Error ratio of one element against one reference element, `got` = ±0 accepted when flushing
 * the reference's output could give it (some value within tolerance of `want` is subnormal). */
export function flushedRatio(got: Value, want: Value, tol: Tolerance, mag: number): number {
  const r = errorRatio(got, want, tol, mag);
  if (r <= 1 || got !== 0 || typeof want !== "number" || !Number.isFinite(want)) return r;
  return Math.abs(want) - (tol.atol + tol.rtol * mag) < MIN_NORMAL_F32 ? 0 : r;
}
