/**
 * The device registry: maps a device string ("cpu", "webgpu", "webgpu:0") to a Device.
 * A backend registers a factory under its type; devices are opened on first use. Backends whose
 * start-up is asynchronous (webgpu must request an adapter) are opened with `await openDevice()`;
 * after that, `getDevice()` returns them synchronously, as ops need.
 */
import type { Device } from "./device.js";

export interface DeviceFactory {
  /** Open device `index` of this type. Returns a Device when `synchronous`, else a Promise. */
  open(index: number): Device | Promise<Device>;
  /** True when `open` is synchronous, so `getDevice` may open the device on first use. */
  readonly synchronous?: boolean;
  /** Optional hint appended to errors when the device cannot be opened. */
  readonly description?: string;
}

const factories = new Map<string, DeviceFactory>();
const opened = new Map<string, Device>();
const loaders = new Map<string, () => Promise<void>>();

/** Register a backend. Throws if the type is already registered. */
export function registerDevice(type: string, factory: DeviceFactory): void {
  if (factories.has(type)) throw new Error(`device type '${type}' is already registered`);
  factories.set(type, factory);
}

/**
 * Register a lazy loader for a backend that lives in an optional module (e.g. webgpu, which pulls
 * in a native GPU runtime): it is imported only when the device is first opened.
 */
export function registerDeviceLoader(type: string, load: () => Promise<void>): void {
  loaders.set(type, load);
}

/** Device types that can be opened. */
export function deviceTypes(): string[] {
  return [...new Set([...factories.keys(), ...loaders.keys()])];
}

function parse(name: string): { type: string; index: number; key: string } {
  const m = /^([a-z][a-z0-9_]*)(?::(\d+))?$/.exec(name.trim());
  if (!m || (!factories.has(m[1]) && !loaders.has(m[1]))) {
    throw new Error(`unknown device '${name}'; available: ${deviceTypes().join(", ")}`);
  }
  const index = m[2] === undefined ? 0 : Number(m[2]);
  return { type: m[1], index, key: index === 0 ? m[1] : `${m[1]}:${index}` };
}

/** Open (once) and return a device. Throws "unknown device …" or the backend's own reason. */
export async function openDevice(name: string | Device): Promise<Device> {
  if (typeof name !== "string") return name;
  const { type, index, key } = parse(name);
  const ready = opened.get(key);
  if (ready) return ready;
  if (!factories.has(type)) await loaders.get(type)!();
  const factory = factories.get(type);
  if (!factory) throw new Error(`device type '${type}' failed to register itself`);
  const device = await factory.open(index);
  opened.set(key, device);
  return device;
}

/** Return an already-opened device synchronously (cpu opens itself on first use). */
export function getDevice(name: string | Device): Device {
  if (typeof name !== "string") return name;
  const { type, index, key } = parse(name);
  const ready = opened.get(key);
  if (ready) return ready;
  const factory = factories.get(type);
  if (factory?.synchronous) {
    const device = factory.open(index) as Device;
    opened.set(key, device);
    return device;
  }
  throw new Error(`device '${name}' is not open yet: call \`await openDevice("${name}")\` first`);
}
