/**
 * The cpu device's pool of released buffers (devices/cpu/device.ts): a released buffer is handed
 * out again for the same size, and past the pool's cap the size least recently released leaves
 * first, so a serving decode step's buffers stay pooled after a prefill released other sizes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import * as T from "../src/index.js";

const MiB = 1024 * 1024;

test("released cpu buffers are reused by size; past the cap the least recently released size is dropped", () => {
  const dev = T.getDevice("cpu");
  const release = (s: ReturnType<typeof dev.allocate>) => dev.release!(s);
  const pooled = () => (dev as unknown as { pooledBytes: number }).pooledBytes;
  const a = dev.allocate(MiB);
  release(a);
  assert.equal(dev.allocate(MiB).handle, a.handle);
  // Fill the pool to its cap with 1 MiB buffers, then release one of another size.
  const many = Array.from({ length: 300 }, () => dev.allocate(MiB));
  many.forEach(release);
  const cap = pooled();
  assert.ok(cap >= 64 * MiB && cap < 300 * MiB, `the pool holds ${cap} bytes`);
  const b = dev.allocate(MiB + 4096);
  release(b);
  assert.ok(pooled() <= cap, `pool over its cap: ${pooled()} > ${cap}`);
  assert.equal(dev.allocate(MiB + 4096).handle, b.handle, "the newest size stays pooled");
  const handles = new Set(many.map((s) => s.handle));
  assert.ok(handles.has(dev.allocate(MiB).handle), "the older size keeps what fits beside it");
});
