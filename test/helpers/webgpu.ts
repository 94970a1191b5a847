/** Opening the webgpu device in tests: skip with the no-adapter message, except in CI (CI=true), where it fails. */
import type { TestContext } from "node:test";
import type { Device } from "../../src/devices/device.js";
import { openDevice } from "../../src/devices/registry.js";
import { NoAdapterError } from "../../src/devices/webgpu/device.js";

/** The webgpu device, or undefined after marking `t` skipped because no adapter is available. */
export async function webgpuOrSkip(t: TestContext): Promise<Device | undefined> {
  try {
    return await openDevice("webgpu");
  } catch (e) {
    if (!(e instanceof NoAdapterError) || process.env.CI === "true") throw e;
    t.skip(e.message);
    return undefined;
  }
}
