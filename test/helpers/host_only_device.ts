/**
 * A second device for cross-device tests: host memory and no kernels, so a tensor moved to it must
 * be refused by every op before it can reach a cpu kernel. Register it with
 * `registerDevice("hostonly", { synchronous: true, open: () => new HostOnlyDevice() })`.
 */
import type { Device, Storage } from "../../src/index.js";

export class HostOnlyDevice implements Device {
  readonly type = "hostonly";
  readonly name = "hostonly";
  allocate(n: number): Storage { return { device: this, handle: new Uint8Array(n), nbytes: n }; }
  upload(bytes: Uint8Array): Storage { return { device: this, handle: bytes, nbytes: bytes.byteLength }; }
  readSync(s: Storage, o: number, n: number) { return (s.handle as Uint8Array).subarray(o, o + n); }
  async read(s: Storage, o: number, n: number) { return this.readSync(s, o, n).slice(); }
  async synchronize() {}
}
