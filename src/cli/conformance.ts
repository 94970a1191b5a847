/**
 * `tsorch conformance`: run the conformance suite (every op of the tensor API against float64
 * references) on one device, print the per-op table and the pass rate, and write
 * conformance-<device>.json. Exits non-zero when a case fails.
 */
import { writeFileSync } from "node:fs";
import { formatReport, runConformance } from "../conformance/runner.js";
import { openDevice } from "../devices/registry.js";
import { parseFlags } from "./args.js";

export const CONFORMANCE_USAGE = `usage: tsorch conformance [--device cpu|webgpu] [--json] [--op NAME]
  --device D   the device to check (default cpu)
  --json       print the report as JSON instead of the table
  --op NAME    only the cases of ops whose name contains NAME
Writes conformance-<device>.json in the current directory.`;

export async function conformanceCommand(argv: string[]): Promise<void> {
  const v = parseFlags(argv, { device: { type: "string" }, json: { type: "boolean" }, op: { type: "string" } });
  const device = await openDevice((v.device as string | undefined) ?? "cpu");
  const report = await runConformance(device, v.op as string | undefined);
  const json = JSON.stringify(report, null, 1);
  writeFileSync(`conformance-${device.type}.json`, json + "\n");
  const adapter = (device as { adapterName?: string }).adapterName;
  process.stdout.write((v.json ? json : formatReport(report, adapter)) + "\n");
  if (report.failures.length) throw new Error(`${report.failures.length} of ${report.cases} conformance cases failed on ${device.name}`);
}
