/**
 * `node dist/bench/webgpu_step_profile.js --model DIR [--kernels] [--batch 64] [--prompt 8]
 *  [--rounds 3]`: where one decode step's time goes on webgpu, by kernel. Prefills a batch of
 * random prompts, records every dispatch of the next decode step (pipeline, buffers, parameters,
 * workgroups) while it runs, then replays each recorded dispatch alone in step order, one submit
 * each, waiting for the queue after each (`rounds` replays; medians). Prints one line per kernel
 * key and workgroup grid (process CPU ms per step, share, wall ms, dispatches) and the sums. CPU
 * time counts a software adapter's (lavapipe's) threads, which run in this process, and is the
 * steadier measure on a loaded host. Replays read the buffers as the step left them,
 * so data-dependent kernels (the MoE sort's tiles) see this step's routing.
 */
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    model: { type: "string" }, kernels: { type: "boolean", default: false },
    batch: { type: "string", default: "64" }, prompt: { type: "string", default: "8" }, rounds: { type: "string", default: "3" },
  },
});
if (!values.model) throw new Error("--model DIR is required");
const { AutoModelForCausalLM } = await import("../src/transformers/index.js");
const { Dispatcher } = await import("../src/devices/webgpu/dispatch.js");
const { getDevice } = await import("../src/devices/registry.js");
type Prog = { pipeline: GPUComputePipeline; layout: GPUBindGroupLayout };
const keys = new Map<GPUComputePipeline, string>();
const proto = Dispatcher.prototype as unknown as {
  program(this: unknown, key: string, access: unknown, code: unknown): Prog;
  dispatch(this: unknown, prog: Prog, buffers: readonly GPUBuffer[], params: ArrayLike<number>, groups: readonly number[]): void;
};
const program = proto.program, dispatch = proto.dispatch;
proto.program = function (key, access, code) {
  const p = program.call(this, key, access, code);
  keys.set(p.pipeline, key);
  return p;
};
type Captured = { prog: Prog; buffers: GPUBuffer[]; params: Uint32Array; groups: number[] };
let capture = null as Captured[] | null;
proto.dispatch = function (prog, buffers, params, groups) {
  capture?.push({ prog, buffers: [...buffers], params: Uint32Array.from(params), groups: [...groups] });
  dispatch.call(this, prog, buffers, params, groups);
};

const batch = Number(values.batch), prompt = Number(values.prompt), rounds = Number(values.rounds);
const model = await AutoModelForCausalLM.fromPretrained(values.model, { device: "webgpu" });
if (values.kernels) {
  const { kernelize, LayerRepository } = await import("../src/kernels/index.js");
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../hub-kernels");
  const repo = (name: string, layerName: string) => ({ webgpu: new LayerRepository({ repoId: path.join(root, name), layerName }) });
  await kernelize(model, { device: "webgpu", mapping: { RMSNorm: repo("rmsnorm", "RMSNorm"), SiluAndMul: repo("silu-and-mul", "SiluAndMul"), MoE: repo("moe-grouped-gemm", "MoE") } });
}
let s = 12345;
const vocab = model.config.vocab_size as number;
const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) % vocab);
const ids = Array.from({ length: batch }, () => Array.from({ length: prompt }, rand));
const recorded: Captured[] = [];
let step = 0;
for await (const _ of model.generateStream(ids, { maxNewTokens: 3, doSample: false, eosTokenId: [] as number[] })) {
  void _;
  step++;
  capture = step === 1 ? recorded : null; // the dispatches of decode step 2
}
capture = null;

const dev = getDevice("webgpu") as unknown as { gpu: GPUDevice; dispatcher: { flush(): void } };
const gpu = dev.gpu;
const params = gpu.createBuffer({ size: 256, usage: 0x40 | 0x08 });
const times = recorded.map(() => [] as number[]), cpu = recorded.map(() => [] as number[]);
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < recorded.length; i++) {
    const d = recorded[i];
    gpu.queue.writeBuffer(params, 0, d.params.buffer, 0, d.params.byteLength);
    const group = gpu.createBindGroup({ layout: d.prog.layout, entries: [
      { binding: 0, resource: { buffer: params, offset: 0, size: 256 } }, ...d.buffers.map((b, j) => ({ binding: j + 1, resource: b }))] });
    await gpu.queue.onSubmittedWorkDone();
    const t0 = performance.now(), c0 = process.cpuUsage();
    const enc = gpu.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(d.prog.pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(d.groups[0], d.groups[1], d.groups[2]);
    pass.end();
    gpu.queue.submit([enc.finish()]);
    await gpu.queue.onSubmittedWorkDone();
    const c = process.cpuUsage(c0);
    times[i].push(performance.now() - t0);
    cpu[i].push((c.user + c.system) / 1000);
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];
const byKey = new Map<string, { n: number; ms: number; cpu: number; groups: string }>();
recorded.forEach((d, i) => {
  const k = `${keys.get(d.prog.pipeline) ?? "?"} [${d.groups.join("x")}]`;
  const e = byKey.get(k) ?? { n: 0, ms: 0, cpu: 0, groups: d.groups.join("x") };
  e.n++; e.ms += median(times[i]); e.cpu += median(cpu[i]);
  byKey.set(k, e);
});
const total = [...byKey.values()].reduce((a, e) => a + e.cpu, 0), wall = [...byKey.values()].reduce((a, e) => a + e.ms, 0);
for (const [k, e] of [...byKey].sort((a, b) => b[1].cpu - a[1].cpu)) {
  console.log(`${e.cpu.toFixed(1).padStart(8)} cpu ms ${((100 * e.cpu) / total).toFixed(1).padStart(5)}% ${e.ms.toFixed(1).padStart(8)} wall ms  x${String(e.n).padEnd(4)} ${k}`);
}
console.log(`${total.toFixed(1).padStart(8)} cpu ms ${wall.toFixed(1)} wall ms total, ${recorded.length} dispatches (kernels ${values.kernels ? "on" : "off"}, batch ${batch})`);
process.exit(0);
