/**
 * GPU adapters in Node: Dawn, from the `webgpu` npm package (a runtime with WebGPU built in, such
 * as Deno, is used as it is). Dawn's default backend first, then its OpenGL ES backend in
 * compatibility mode as a fallback; any of them only where a workgroup reduction runs right on it
 * (reduction_check.ts).
 */
import { native } from "../cpu/native.js";
import { checkedAdapter } from "./reduction_check.js";
import { NoAdapterError } from "./device.js";

/** What to do when no adapter is found (also the device's registry description). */
export const INSTALL_HINT =
  "webgpu needs a GPU adapter. With a GPU, install its Vulkan driver (Linux), or use macOS (Metal) or Windows (D3D12). " +
  "Without one, install Mesa's software Vulkan driver (lavapipe) from a recent Mesa: Debian 12's own Mesa 22.3 is refused " +
  "by Dawn, Mesa 25 from bookworm-backports works (add bookworm-backports to apt's sources, then " +
  "`apt-get install -t bookworm-backports mesa-vulkan-drivers libvulkan1`).";

/**
 * Every GPU object Dawn handed out, referenced for the life of the process: dawn.node crashes
 * (std::system_error, futex errors, a segfault in CallbackTaskManager::Flush) when the garbage
 * collector takes it while a device is in use.
 */
const gpus: GPU[] = [];

async function loadDawn(): Promise<typeof import("webgpu")> {
  try {
    return await import("webgpu");
  } catch (e) {
    throw new NoAdapterError(`the webgpu device needs the \`webgpu\` npm package (Dawn): run \`npm install webgpu\`. Cause: ${(e as Error).message}`);
  }
}

/**
 * Call `fn` with the process's stderr muted unless TSORCH_DEBUG is set: Dawn prints warnings from
 * C++ straight to file descriptor 2 while it enumerates adapters (on software adapters such as
 * lavapipe: "maxDynamicUniformBuffersPerPipelineLayout artificially reduced …"). Muting uses the
 * cpu device's native addon; without it the warnings pass through.
 */
function quietly<T>(fn: () => T): T {
  if (process.env.TSORCH_DEBUG) return fn();
  let saved: number;
  try {
    saved = native().muteStderr();
  } catch {
    return fn();
  }
  try {
    return fn();
  } finally {
    native().restoreStderr(saved);
  }
}

/** `gpu`'s adapter for `options` once it passes the reduction check (checkedAdapter), or null if it has none. */
async function checkedDawnAdapter(gpu: GPU, options: GPURequestAdapterOptions): Promise<GPUAdapter | null> {
  const first = await quietly(() => gpu.requestAdapter(options));
  return first && checkedAdapter(first, () => quietly(() => gpu.requestAdapter(options)), INSTALL_HINT);
}

/** An adapter from the runtime's own navigator.gpu, else from Dawn. Throws NoAdapterError with INSTALL_HINT. */
export async function dawnAdapter(): Promise<GPUAdapter> {
  // A runtime with WebGPU built in (Deno) needs no Dawn.
  const builtin = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
  const native = builtin && (await builtin.requestAdapter({ powerPreference: "high-performance" }));
  if (native) return checkedAdapter(native, () => builtin.requestAdapter({ powerPreference: "high-performance" }), INSTALL_HINT);
  const dawn = await loadDawn();
  const gpu = dawn.create([]);
  gpus.push(gpu);
  const adapter = await checkedDawnAdapter(gpu, { powerPreference: "high-performance" });
  if (adapter) return adapter;
  // Fallback: Dawn's OpenGL ES backend, headless through EGL (Mesa's llvmpipe works here too).
  process.env.EGL_PLATFORM ??= "surfaceless";
  const gl = dawn.create(["backend=opengles"]);
  gpus.push(gl);
  const fallback = await checkedDawnAdapter(gl, { featureLevel: "compatibility" });
  if (fallback) return fallback;
  throw new NoAdapterError(`webgpu: no GPU adapter found (Dawn tried its default backend and OpenGL ES). ${INSTALL_HINT}`);
}
