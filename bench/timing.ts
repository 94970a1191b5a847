/**
 * Timing for the kernel benchmarks: milliseconds per call, the best wall time over `windows`
 * windows of at least `minMs` each, and the least process CPU time (all threads together) per call
 * over the same windows (on a loaded machine the wall time also measures the other load; CPU time
 * much less). One untimed warm-up call first. bench/peer_timing.py is the PyTorch side's twin.
 */
export interface Ms { wall: number; cpu: number }

export function bestMs(fn: () => void, windows: number, minMs: number): Ms {
  fn();
  let wall = Infinity, cpu = Infinity;
  for (let w = 0; w < windows; w++) {
    const t0 = performance.now(), c0 = process.cpuUsage();
    let n = 0, t = 0;
    do {
      fn();
      n++;
      t = performance.now() - t0;
    } while (t < minMs);
    const c = process.cpuUsage(c0);
    wall = Math.min(wall, t / n);
    cpu = Math.min(cpu, (c.user + c.system) / 1e3 / n);
  }
  return { wall, cpu };
}
