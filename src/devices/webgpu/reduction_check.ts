/**
 * A check that an adapter runs workgroup reductions right: every reduction kernel of this device
 * (norms, attention's softmax, sums) writes partials to workgroup memory, reads the others' after
 * workgroupBarrier(), and keeps using the result. Dawn's OpenGL ES backend on Debian 12's Mesa 22.3
 * (llvmpipe) gets that wrong without an error: in a 64-thread workgroup, a reduction's result
 * scaled by a constant and still in use after a second reduction holds a wrong value in every
 * thread past the first 8 (one 256-bit SIMD row), as if its load from workgroup memory had moved
 * past the second reduction's barriers; layerNorm, groupNorm and attention failed conformance
 * there, Mesa 25's llvmpipe passes. The check runs that shape, with the norms' own reduction
 * (workgroupSum), once on a throwaway device and compares every thread's results with the exact
 * ones.
 */

import { adapterName, NoAdapterError } from "./device.js";
import { workgroupSum } from "./kernels/wgsl.js";

const WG = 64;
const SHADER = /* wgsl */ `${workgroupSum(WG)}
@group(0) @binding(0) var<storage, read_write> Y: array<f32>;
@compute @workgroup_size(${WG}) fn main(@builtin(local_invocation_index) lid: u32) {
  // layerNorm's shape: a mean, then a second reduction, then the mean used again. (A product by
  // 1/64, not a quotient: WGSL rounds products exactly, quotients within 2.5 ulp.)
  let mean = row_sum(f32(lid + 1u), lid) * ${1 / WG};
  let second = row_sum(mean * mean, lid);
  Y[lid] = mean;
  Y[${WG}u + lid] = second;
}`;

/**
 * Whether `adapter` runs a 64-thread workgroup reduction and broadcast correctly in every thread.
 * Uses the adapter up (a WebGPU adapter gives one device): request a fresh one afterwards. Throws
 * an Error naming the device error if the check's shader or buffers are refused.
 */
export async function workgroupReductionsWork(adapter: GPUAdapter): Promise<boolean> {
  const device = await adapter.requestDevice();
  try {
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ code: SHADER });
    const pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
    const bytes = 2 * WG * 4;
    // GPUBufferUsage's values (STORAGE | COPY_SRC, MAP_READ | COPY_DST), spelled out: Node has no
    // GPUBufferUsage global unless the webgpu package's globals were installed.
    const out = device.createBuffer({ size: bytes, usage: 0x80 | 0x04 });
    const read = device.createBuffer({ size: bytes, usage: 0x01 | 0x08 });
    const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: out } }] });
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(1);
    pass.end();
    encoder.copyBufferToBuffer(out, 0, read, 0, bytes);
    device.queue.submit([encoder.finish()]);
    const error = await device.popErrorScope();
    if (error) throw new Error(`the reduction check's shader did not run: ${error.message}`);
    await read.mapAsync(1 /* GPUMapMode.READ */);
    const got = new Float32Array(read.getMappedRange().slice(0));
    read.unmap();
    // Exact in float32: the mean of 1..64 is 32.5, and 64 * 32.5^2 = 67600.
    return got.every((v, i) => v === (i < WG ? 32.5 : 67600));
  } finally {
    device.destroy();
  }
}

/**
 * `first` checked with workgroupReductionsWork, then a fresh adapter from `again` (the check used
 * `first` up). Throws NoAdapterError naming the adapter, followed by `hint` (what to install or
 * use instead), if the check fails or cannot run, or if `again` finds none.
 */
export async function checkedAdapter(first: GPUAdapter, again: () => Promise<GPUAdapter | null>, hint: string): Promise<GPUAdapter> {
  const name = `webgpu: the adapter found (${adapterName(first)})`;
  let works: boolean;
  try {
    works = await workgroupReductionsWork(first);
  } catch (e) {
    throw new NoAdapterError(`${name} could not run a workgroup reduction (${(e as Error).message}); it is not used. ${hint}`);
  }
  if (!works) {
    throw new NoAdapterError(
      `${name} computes workgroup reductions wrong (e.g. Debian 12's Mesa 22.3 llvmpipe behind Dawn's OpenGL ES backend), ` +
        `so norms and attention would too; it is not used. ${hint}`,
    );
  }
  const fresh = await again();
  if (!fresh) throw new NoAdapterError(`${name} passed the reduction check, but asking again gave no adapter. ${hint}`);
  return fresh;
}
