/**
 * The metadata file of a kernel build variant, `build/<variant>/metadata.json`: the kernel's name
 * and version, the module (cpu-wasm) and, for every op it exports, its signature — inputs with the
 * dtypes they accept and shape rules, scalars, outputs — and how to run it on that variant
 * (WGSL dispatches, or a WebAssembly export). It is data only: shapes, sizes and parameters are
 * expressions of ./expr.ts over the names the shape rules bind.
 *
 * Shape rules: a list of dims, each an integer, a name (bound by its first use, checked on every
 * later one) or "..." (any leading dims; bound once, as a whole).
 */
import { readFileSync } from "node:fs";
import type { DType } from "../tensor/dtype.js";
import { DTYPES } from "../tensor/dtype.js";
import type { Tensor } from "../tensor/tensor.js";
import { evaluate, type Scope } from "./expr.js";

/** Build variants tsorch loads, and the device type each runs on. */
export const VARIANT_DEVICE = { "webgpu-wgsl": "webgpu", "cpu-wasm": "cpu" } as const;
export type Variant = keyof typeof VARIANT_DEVICE;
export const VARIANTS = Object.keys(VARIANT_DEVICE) as Variant[];

/** The variant that runs on a device type, if any. */
export function variantFor(deviceType: string): Variant | undefined {
  return VARIANTS.find((v) => VARIANT_DEVICE[v] === deviceType);
}

/** Codes of dtypes as kernels see them (WGSL `<input>_DTYPE` constants, dtype(x) in expressions). */
export const DTYPE_CODE: Record<DType, number> = { float32: 0, float16: 1, bfloat16: 2, int32: 3, int64: 4, bool: 5 };

export interface InputSpec { dtypes: DType[]; shape: string[]; }
export interface OutputSpec { dtype: DType; shape: string[]; }
/** A scratch buffer of `size` elements, allocated per call. */
export interface TempSpec { dtype: DType; size: string; }
/**
 * One WGSL dispatch: its source file, workgroup counts, u32 parameters ("f32:" prefix: float bits),
 * bound tensors, and which of them it writes (default: every output and temp it binds).
 */
export interface DispatchSpec { source: string; workgroups: [string, string, string]; params: string[]; bindings: string[]; writes?: string[]; }
/** One WebAssembly call: the export and its arguments (expressions; ptr(x) is tensor x's address). */
export interface CallSpec { export: string; args: string[]; }

export interface OpSpec {
  inputs: Record<string, InputSpec>;
  /** Scalar arguments after the tensors, in order; "name=default" makes one optional. */
  scalars?: string[];
  outputs: Record<string, OutputSpec>;
  /** Derived names, evaluated in order. */
  let?: Record<string, string>;
  /** Conditions the arguments must meet (expressions that must be non-zero). */
  require?: string[];
  temps?: Record<string, TempSpec>;
  /** cpu-wasm: inputs kept in the module's memory across calls (weights). */
  resident?: string[];
  dispatches?: DispatchSpec[];
  call?: CallSpec;
}

export interface VariantMetadata {
  name: string;
  version: number;
  variant: Variant;
  /** cpu-wasm: the WebAssembly module file. */
  module?: string;
  ops: Record<string, OpSpec>;
  /** Layer name (useKernelForwardFromHub) → op implementing tsorch's contract for that layer. */
  layers?: Record<string, string>;
}

/** Read and check `build/<variant>/metadata.json`; throws naming the file and the problem. */
export function readMetadata(file: string, variant: Variant): VariantMetadata {
  let m: VariantMetadata;
  try {
    m = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(`kernel metadata ${file} is not valid JSON: ${(e as Error).message}`);
  }
  const bad = (why: string): never => { throw new Error(`kernel metadata ${file}: ${why}`); };
  if (typeof m.name !== "string" || !Number.isInteger(m.version)) bad("expected \"name\" (string) and \"version\" (integer)");
  if (m.variant !== variant) bad(`"variant" is ${JSON.stringify(m.variant)} but the folder is build/${variant}`);
  if (variant === "cpu-wasm" && typeof m.module !== "string") bad("a cpu-wasm variant names its WebAssembly \"module\"");
  if (!m.ops || typeof m.ops !== "object") bad("expected \"ops\"");
  for (const [name, op] of Object.entries(m.ops)) {
    for (const [i, s] of Object.entries(op.inputs ?? bad(`op ${name} has no "inputs"`))) {
      if (!Array.isArray(s.dtypes) || s.dtypes.some((d) => !DTYPES.includes(d))) bad(`op ${name} input ${i}: "dtypes" must list dtypes of ${DTYPES.join(", ")}`);
    }
    if (!op.outputs) bad(`op ${name} has no "outputs"`);
    if (variant === "webgpu-wgsl" && !Array.isArray(op.dispatches)) bad(`op ${name} has no "dispatches"`);
    for (const w of (op.dispatches ?? []).flatMap((d) => d.writes ?? [])) if (w in op.inputs) bad(`op ${name}: a dispatch writes input ${w}; inputs are read-only`);
    if (variant === "cpu-wasm" && !op.call) bad(`op ${name} has no "call"`);
  }
  for (const [layer, op] of Object.entries(m.layers ?? {})) if (!m.ops[op]) bad(`layer ${layer} names op ${op}, which is not in "ops"`);
  return m;
}

/** A call's arguments checked against its op's signature, with every name of its rules bound. */
export interface BoundCall {
  inputs: Record<string, Tensor>;
  /** Output shapes. */
  outputs: Record<string, number[]>;
  scope: Scope;
}

/**
 * Check `args` (tensors in the order of `op.inputs`, then scalars) against `op`'s signature and
 * bind its names. Throws TypeError naming the kernel, the op and the argument for a dtype the
 * signature excludes, RangeError for a shape that breaks a rule or an unmet requirement.
 */
export function bindCall(kernel: string, opName: string, op: OpSpec, args: (Tensor | number)[], extraFns: Scope["fns"] = {}): BoundCall {
  const where = `kernel ${kernel}: op ${opName}`;
  const inputNames = Object.keys(op.inputs), scalarSpecs = op.scalars ?? [];
  const required = inputNames.length + scalarSpecs.filter((s) => !s.includes("=")).length;
  if (args.length < required || args.length > inputNames.length + scalarSpecs.length) {
    throw new TypeError(`${where} takes ${inputNames.join(", ")}${scalarSpecs.length ? `, ${scalarSpecs.join(", ")}` : ""}; got ${args.length} arguments`);
  }
  const inputs: Record<string, Tensor> = {};
  const names: Record<string, number> = {};
  let ellipsis: readonly number[] | undefined;
  inputNames.forEach((name, i) => {
    const t = args[i], spec = op.inputs[name];
    if (typeof t !== "object") throw new TypeError(`${where}: argument ${name} must be a tensor`);
    if (!spec.dtypes.includes(t.dtype)) {
      throw new TypeError(`${where}: ${name} has dtype ${t.dtype}, but its signature allows ${spec.dtypes.join(", ")}`);
    }
    const rule = spec.shape, lead = rule[0] === "..." ? t.ndim - (rule.length - 1) : 0;
    const mismatch = () => new RangeError(`${where}: ${name} has shape [${t.shape}], which does not match [${rule.join(", ")}]${Object.keys(names).length ? ` with ${Object.entries(names).map(([k, v]) => `${k}=${v}`).join(", ")}` : ""}`);
    if (lead < 0 || (rule[0] !== "..." && t.ndim !== rule.length)) throw mismatch();
    if (rule[0] === "...") {
      const dims = t.shape.slice(0, lead);
      if (ellipsis && (ellipsis.length !== dims.length || ellipsis.some((d, j) => d !== dims[j]))) throw mismatch();
      ellipsis = dims;
    }
    rule.slice(rule[0] === "..." ? 1 : 0).forEach((dim, j) => {
      const size = t.shape[lead + j];
      if (/^\d+$/.test(dim)) { if (Number(dim) !== size) throw mismatch(); }
      else if (dim in names) { if (names[dim] !== size) throw mismatch(); }
      else names[dim] = size;
    });
    inputs[name] = t;
  });
  scalarSpecs.forEach((s, i) => {
    const [name, dflt] = s.split("=");
    const v = args[inputNames.length + i] ?? (dflt === undefined ? undefined : Number(dflt));
    if (typeof v !== "number") throw new TypeError(`${where}: scalar ${name} must be a number`);
    names[name] = v;
  });
  const tensorOf = (n: string) => inputs[n] ?? (() => { throw new Error(`${where}: metadata names unknown tensor '${n}'`); })();
  const scope: Scope = {
    names,
    fns: {
      numel: (n) => tensorOf(n).numel,
      offset: (n) => tensorOf(n).offset,
      dtype: (n) => DTYPE_CODE[tensorOf(n).dtype],
      ...extraFns,
    },
  };
  for (const [n, e] of Object.entries(op.let ?? {})) names[n] = evaluate(e, scope);
  for (const r of op.require ?? []) {
    if (!evaluate(r, scope)) throw new RangeError(`${where}: arguments break the rule ${r} (${Object.entries(names).map(([k, v]) => `${k}=${v}`).join(", ")})`);
  }
  const outputs: Record<string, number[]> = {};
  for (const [n, o] of Object.entries(op.outputs)) {
    outputs[n] = o.shape.flatMap((d) => (d === "..." ? [...(ellipsis ?? [])] : [evaluate(d, scope)]));
  }
  return { inputs, outputs, scope };
}
