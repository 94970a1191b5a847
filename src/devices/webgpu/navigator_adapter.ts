/// <reference types="@webgpu/types" />
/** GPU adapters in browsers: the page's own `navigator.gpu`. */
import { NoAdapterError } from "./device.js";
import { checkedAdapter } from "./reduction_check.js";

/** What a page needs for the webgpu device (also the device's registry description). */
export const BROWSER_HINT =
  "webgpu needs a browser with WebGPU (navigator.gpu): Chrome or Edge 113+, Safari 26+, Firefox 141+ on Windows; " +
  "pages must be served over https or from localhost. Headless Chromium without a GPU: --enable-unsafe-webgpu --enable-unsafe-swiftshader.";

/**
 * An adapter from navigator.gpu that runs workgroup reductions right (reduction_check.ts). Throws
 * NoAdapterError when the browser has no WebGPU or no such adapter.
 */
export async function navigatorAdapter(): Promise<GPUAdapter> {
  const gpu = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
  if (!gpu) throw new NoAdapterError(`webgpu: this browser has no WebGPU (navigator.gpu is undefined). ${BROWSER_HINT}`);
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new NoAdapterError(`webgpu: navigator.gpu.requestAdapter() found no adapter. ${BROWSER_HINT}`);
  return checkedAdapter(adapter, () => gpu.requestAdapter({ powerPreference: "high-performance" }), BROWSER_HINT);
}
