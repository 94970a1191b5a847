/**
 * The conformance runner: every case on one device, outputs compared with the float64 references,
 * a per-op table and the pass rate (conformance-<device>.json holds the same as JSON). On a device
 * that may flush float32 subnormals (Device.flushesSubnormals, e.g. webgpu as WGSL allows),
 * arithmetic cases also accept their subnormal-flushed references (the rule: ./flush.ts).
 */
import type { Device } from "../devices/device.js";
import { registeredOps } from "../devices/kernels.js";
import type { DType } from "../tensor/dtype.js";
import { place, type Case, type Expected } from "./case.js";
import { blockQuantCases } from "./cases/block_quant.js";
import { hubQuantCases } from "./cases/hub_quant.js";
import { copyCases } from "./cases/copy.js";
import { elementwiseCases } from "./cases/elementwise.js";
import { gatedDeltaCases } from "./cases/gated_delta.js";
import { nnCases } from "./cases/nn.js";
import { quantCases } from "./cases/quant.js";
import { reduceFamilyCases } from "./cases/reduce.js";
import { spatialCases } from "./cases/spatial.js";
import { flushedRatio, flushedReferences } from "./flush.js";
import { errorRatio, num, type Value } from "./reference.js";

/** Every conformance case. */
export function allCases(): Case[] {
  return [...copyCases(), ...elementwiseCases(), ...reduceFamilyCases(), ...nnCases(), ...gatedDeltaCases(), ...quantCases(), ...blockQuantCases(), ...spatialCases(), ...hubQuantCases()];
}

export interface CaseResult {
  op: string;
  name: string;
  passed: boolean;
  /** Why it failed. */
  reason?: string;
  /** Largest error as a fraction of the allowed error (0 = exact). */
  worst: number;
}

export interface OpSummary {
  op: string;
  cases: number;
  passed: number;
  worst: number;
}

export interface Report {
  device: string;
  cases: number;
  passed: number;
  /** Passed cases / cases, in percent. */
  passRate: number;
  ops: OpSummary[];
  failures: CaseResult[];
  /** "op: case" of the cases not run because the device lacks their optional kernel (Case.kernel). */
  notRun: string[];
}

/** One output as read back from the device. */
export interface Output {
  dtype: DType;
  shape: readonly number[];
  values: ArrayLike<Value>;
}

async function check(c: Case, device: Device): Promise<CaseResult> {
  let got: Output[];
  try {
    const out = c.run(c.inputs.map((i) => place(i, device)));
    const outs = Array.isArray(out) ? out : [out];
    got = [];
    for (const t of outs) got.push({ dtype: t.dtype, shape: t.shape, values: (await t.data()) as ArrayLike<Value> });
  } catch (e) {
    const err = e as Error;
    if (!Array.isArray(c.expect) && err?.name === c.expect.throws) return { op: c.op, name: c.name, passed: true, worst: 0 };
    return { op: c.op, name: c.name, passed: false, worst: Infinity, reason: `threw ${err?.name}: ${err?.message}` };
  }
  return compareOutputs(c, got, device.flushesSubnormals === "may");
}

/**
 * Compare a case's outputs with its references. `flushes`: the device may flush float32
 * subnormals (Device.flushesSubnormals), so cases with Case.reference also accept the flushed
 * references of ./flush.ts, element by element.
 */
export function compareOutputs(c: Case, got: Output[], flushes: boolean): CaseResult {
  const result = (passed: boolean, worst: number, reason?: string): CaseResult => ({ op: c.op, name: c.name, passed, worst, reason });
  if (!Array.isArray(c.expect)) return result(false, Infinity, `expected ${c.expect.throws}, nothing was thrown`);
  if (got.length !== c.expect.length) return result(false, Infinity, `${got.length} outputs, expected ${c.expect.length}`);
  const magOf = (want: Expected, i: number) => {
    const mag = want.mag?.[i];
    const m = mag !== undefined && Number.isFinite(mag) ? mag : Math.abs(num(want.values[i]));
    return Number.isFinite(m) ? m : 0;
  };
  let flushed: Expected[][] | undefined;
  let worst = 0;
  for (let k = 0; k < got.length; k++) {
    const { values } = got[k], want = c.expect[k];
    if (got[k].dtype !== want.dtype) return result(false, Infinity, `output ${k}: dtype ${got[k].dtype}, expected ${want.dtype}`);
    if (got[k].shape.length !== want.shape.length || got[k].shape.some((s, i) => s !== want.shape[i])) {
      return result(false, Infinity, `output ${k}: shape [${got[k].shape}], expected [${want.shape}]`);
    }
    for (let i = 0; i < want.values.length; i++) {
      let r = errorRatio(values[i], want.values[i], c.tol, magOf(want, i));
      if (!(r <= 1) && flushes && c.reference) {
        flushed ??= flushedReferences(c.reference, c.inputs.map((inp) => inp.t));
        for (const ref of [want, ...flushed.map((e) => e[k])]) r = Math.min(r, flushedRatio(values[i], ref.values[i], c.tol, magOf(ref, i)));
      }
      if (!(r <= 1)) return result(false, r, `output ${k}[${i}]: got ${values[i]}, expected ${want.values[i]}${flushed ? " (or its subnormal-flushed references)" : ""}`);
      worst = Math.max(worst, r);
    }
  }
  return result(true, worst);
}

/**
 * Run every case (or those whose op contains `filter`) on `device`. A filter that selects no case
 * throws a RangeError listing the ops, so a typo never reports 100%.
 */
export async function runConformance(device: Device, filter?: string): Promise<Report> {
  const all = allCases();
  const cases = all.filter((c) => filter === undefined || c.op.includes(filter));
  if (cases.length === 0) {
    throw new RangeError(`--op '${filter}' selects no conformance case; ops: ${[...new Set(all.map((c) => c.op))].join(", ")}`);
  }
  const results: CaseResult[] = [];
  const notRun: string[] = [];
  const have = new Set(registeredOps(device.type));
  for (const c of cases) {
    if (c.kernel && !have.has(c.kernel)) notRun.push(`${c.op}: ${c.name}`);
    else results.push(await check(c, device));
  }
  const ops = new Map<string, OpSummary>();
  for (const r of results) {
    const s = ops.get(r.op) ?? { op: r.op, cases: 0, passed: 0, worst: 0 };
    s.cases++;
    if (r.passed) {
      s.passed++;
      s.worst = Math.max(s.worst, r.worst);
    }
    ops.set(r.op, s);
  }
  const passed = results.filter((r) => r.passed).length;
  return {
    device: device.name,
    cases: results.length,
    passed,
    passRate: results.length ? (100 * passed) / results.length : 100,
    ops: [...ops.values()],
    failures: results.filter((r) => !r.passed),
    notRun,
  };
}

/** The per-op table, the failures and the pass rate, as printed by `tsorch conformance`. */
export function formatReport(report: Report, adapter = ""): string {
  const lines = [`conformance on ${report.device}${adapter ? ` (${adapter})` : ""}`, `${"op".padEnd(28)}${"cases".padStart(7)}${"passed".padStart(8)}  worst error / tolerance`];
  for (const s of report.ops) {
    lines.push(`${s.op.padEnd(28)}${String(s.cases).padStart(7)}${String(s.passed).padStart(8)}  ${s.worst.toFixed(3)}`);
  }
  for (const f of report.failures) lines.push(`FAIL ${f.op}: ${f.name}: ${f.reason}`);
  for (const n of report.notRun) lines.push(`NOT RUN (no kernel on this device) ${n}`);
  lines.push(`pass rate: ${report.passRate.toFixed(1)}% (${report.passed}/${report.cases} cases, ${report.ops.length} ops)`);
  return lines.join("\n");
}
