/**
 * A yielding poll for Dawn's pending reads. Dawn's Node binding (the `webgpu` package) completes a
 * `mapAsync` by polling: each poll re-queues itself through `globalThis.setImmediate`, so while a
 * read is pending the host thread spins at 100% of a core (tens of thousands of polls per second).
 * On a software adapter (lavapipe) that core is the one the device's own worker threads need.
 *
 * `yieldingPolls(promise)` lets the first polls of a read run as they were (a read that completes
 * quickly is not delayed) and, once the read has been pending for 0.25 ms (TSORCH_WEBGPU_SPIN_MS;
 * a negative value keeps Dawn's spinning), defers each later poll
 * by a timer (Node's ~1 ms minimum), so the thread sleeps between polls. Only Dawn's polls are
 * deferred: calls of `setImmediate` with a single native callback and no arguments (what the
 * binding passes; a built-in such as a promise's resolve function is deferred the same way, by at
 * most a timer tick); every other call goes straight through. Reads may overlap; the original
 * `setImmediate` is restored when the last one settles.
 */

/** How long (ms) a pending read is polled at full speed before polls wait for a timer. */
const spinMs = () => Number(process.env.TSORCH_WEBGPU_SPIN_MS ?? 0.25);

type Immediate = typeof globalThis.setImmediate;
let original: Immediate | null = null;
let pending = 0;
/** When the oldest pending read started (performance.now() ms). */
let since = 0;

const nativeSource = /\{\s*\[native code\]\s*\}$/;

function isNativeCallback(fn: unknown, extra: number): boolean {
  return extra === 0 && typeof fn === "function" && nativeSource.test(Function.prototype.toString.call(fn));
}

function install(spin: number): void {
  const immediate = globalThis.setImmediate;
  original = immediate;
  since = performance.now();
  const patched = ((fn: (...a: unknown[]) => void, ...args: unknown[]) => {
    if (performance.now() - since >= spin && isNativeCallback(fn, args.length)) {
      // A Timeout, not an Immediate: Dawn ignores the handle.
      return setTimeout(fn, 0) as unknown as NodeJS.Immediate;
    }
    return immediate(fn, ...args);
  }) as Immediate;
  globalThis.setImmediate = patched;
}

/** Await `read` (a pending Dawn `mapAsync`) with Dawn's polls yielding the CPU once it has waited a while. */
export async function yieldingPolls<T>(read: Promise<T>): Promise<T> {
  const spin = spinMs();
  if (spin < 0) return read;
  if (pending++ === 0) install(spin);
  try {
    return await read;
  } finally {
    if (--pending === 0 && original) {
      globalThis.setImmediate = original;
      original = null;
    }
  }
}
