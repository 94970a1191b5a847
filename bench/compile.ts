/**
 * `node dist/bench/compile.js [--model DIR] [--iters N]`: eager against torch.compile for a
 * decoder forward (default ../shared/models/stories260K), per device (cpu, and webgpu when an
 * adapter opens), measured in the same run, interleaved. Two shapes: one token (a decode step's
 * shape; no KV cache here, staticgen's generate bench measures real decode) and a 32-token prompt.
 * The forward is the model's layers called directly with rotary tables passed in as tensors (the
 * model's own forward builds them from JS positions, which would be a graph break). Prints JSON:
 * milliseconds per forward (median), the speedup, and the host.
 */
import { cpus } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { model: { type: "string" }, iters: { type: "string", default: "30" } } });
const MODEL = values.model ?? path.resolve(here, "../../../shared/models/stories260K");
const ITERS = Number(values.iters);
const torch = await import("../src/index.js");
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { ropeCosSin } = await import("../src/nn/rotary.js");
import type { Tensor } from "../src/tensor/tensor.js";

type LM = Awaited<ReturnType<typeof AutoModelForCausalLM.fromPretrained>> & Record<string, any>;

/** logits = lm_head(norm(layers(embed(ids), cos, sin))) with no mask and no cache. */
function forwardWithTables(m: LM) {
  return function forward(ids: Tensor, cos: Tensor, sin: Tensor): Tensor {
    let x = m.model.embed_tokens.forward(ids);
    for (const layer of m.model.layers.items) x = layer.forward(x, cos, sin, null, null);
    return m.lm_head.forward(m.model.norm.forward(x));
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function measure(device: string) {
  const model = (await AutoModelForCausalLM.fromPretrained(MODEL, { device })) as LM;
  const eager = forwardWithTables(model);
  const compiled = torch.compile(eager);
  const dev = await torch.openDevice(device);
  const rows: Record<string, unknown>[] = [];
  for (const L of [1, 32]) {
    const ids = torch.tensor([Array.from({ length: L }, (_, i) => (i * 37 + 1) % 500)], { dtype: "int64", device });
    const { cos, sin } = ropeCosSin(model.c.rope, [Array.from({ length: L }, (_, i) => i)], dev);
    const run = async (f: typeof eager) => {
      const t0 = performance.now();
      torch.tidy(() => f(ids, cos, sin));
      await dev.synchronize();
      return performance.now() - t0;
    };
    torch.tidy(() => compiled(ids, cos, sin)); // the first call captures (and runs eagerly)
    const a = await torch.tidy(() => eager(ids, cos, sin)).data(), b = await torch.tidy(() => compiled(ids, cos, sin)).data();
    let diff = 0;
    for (let i = 0; i < a.length; i++) diff = Math.max(diff, Math.abs(Number(a[i]) - Number(b[i])));
    for (let i = 0; i < 5; i++) { await run(eager); await run(compiled); }
    const te: number[] = [], tc: number[] = [];
    for (let i = 0; i < ITERS; i++) { te.push(await run(eager)); tc.push(await run(compiled)); }
    rows.push({ device, tokens: L, eagerMs: +median(te).toFixed(3), compiledMs: +median(tc).toFixed(3), speedup: +(median(te) / median(tc)).toFixed(2), maxAbsDiff: diff });
  }
  return rows;
}

const results: Record<string, unknown>[] = [...(await measure("cpu"))];
try {
  results.push(...(await measure("webgpu")));
} catch (e) {
  results.push({ device: "webgpu", skipped: (e as Error).message.split("\n")[0] });
}
console.log(JSON.stringify({ model: MODEL, host: `${cpus()[0]?.model ?? "unknown"} (${cpus().length} cpus)`, iters: ITERS, stats: torch.compiler.stats(), results }, null, 1));
