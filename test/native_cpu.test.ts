/**
 * The cpu device's native addon against float64 references computed here, function by function
 * (see src/devices/cpu/native.ts for the contracts). Inputs are seeded random values with odd
 * sizes, non-contiguous strides and broadcasting. The whole file also runs again in child
 * processes on the AVX2 kernels with 2 threads (TSORCH_CPU_ISA=avx2, where the host has AVX2) and
 * on the portable kernels with 3 threads (TSORCH_CPU_ISA=portable), so the paths used on CPUs
 * without AVX-512 and without AVX2 are tested too. (TSORCH_CPU_ISA picks the kernel tables; the
 * functions compiled with TSORCH_ISA_CLONES, GCC's target_clones, e.g. rms_norm's and rotary's
 * rows, attention, elementwise, always run the clone the CPU supports: cpu_emulated_hosts.test.ts
 * runs this file on emulated CPUs for the others.)
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

import { BINARY, DTYPE_CODE, REDUCE, UNARY, native } from "../src/devices/cpu/native.js";
import { roundFloat } from "../src/conformance/reference.js";

const nat = native();
// Under cpu_emulated_hosts.test.ts (an emulated CPU, TSORCH_EMULATED_CPU set) the GEMM tables'
// tests are left out: they call no per-level functions, take most of the file's time there, and
// run on every table in this file's own child processes.
const gemmTablesSkip = process.env.TSORCH_EMULATED_CPU ? "GEMM tables: tested in native runs (TSORCH_CPU_ISA child processes)" : false;
const F32 = DTYPE_CODE.float32, F16 = DTYPE_CODE.float16, BF16 = DTYPE_CODE.bfloat16;
const I32 = DTYPE_CODE.int32, I64 = DTYPE_CODE.int64, BOOL = DTYPE_CODE.bool;

// ---------------------------------------------------------------------------------------------
// Helpers: seeded random numbers, float16/bfloat16 encodings, comparisons.
// ---------------------------------------------------------------------------------------------

/** mulberry32: a small seeded PRNG giving floats in [0, 1). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randn(n: number, r: () => number, lo = -1, hi = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = lo + (hi - lo) * r();
  return a;
}

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);
const bitsOf = (x: number) => ((f32buf[0] = x), u32buf[0]);
const fromBits = (u: number) => ((u32buf[0] = u >>> 0), f32buf[0]);

const bf16ToF32 = (h: number) => fromBits(h << 16);
function f32ToBf16(x: number): number {
  const u = bitsOf(x);
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  if (e === 0) return s * m * 2 ** -24;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function roundHalfEven(v: number): number {
  const f = Math.floor(v), d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** float32 value -> IEEE half bits, by exact arithmetic on the half grid (round half to even). */
function f32ToF16(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === 0) return sign;
  if (a === Infinity) return sign | 0x7c00;
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  e = Math.max(e, -14);
  const value = roundHalfEven(a / 2 ** (e - 10)) * 2 ** (e - 10);
  if (value > 65504) return sign | 0x7c00;
  if (value < 2 ** -14) return sign | (value / 2 ** -24);
  let e2 = Math.floor(Math.log2(value));
  if (2 ** e2 > value) e2--;
  return sign | ((e2 + 15) << 10) | (value / 2 ** (e2 - 10) - 1024);
}

function toBf16(a: Float32Array): Uint16Array {
  return Uint16Array.from(a, f32ToBf16);
}
function toF16(a: Float32Array): Uint16Array {
  return Uint16Array.from(a, f32ToF16);
}

/** Asserts |actual - expected| <= atol + rtol * |expected| elementwise (NaN matches NaN). */
function close(actual: ArrayLike<number>, expected: ArrayLike<number>, atol: number, rtol = 0, what = "") {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i], e = expected[i];
    if (Number.isNaN(e) && Number.isNaN(a)) continue;
    if (a === e) continue;
    const tol = atol + rtol * Math.abs(e);
    if (!(Math.abs(a - e) <= tol))
      assert.fail(`${what}: element ${i}: got ${a}, expected ${e} (tolerance ${tol})`);
  }
}

/** Asserts each element is within tol[i] (a per-element bound, e.g. from sum |x*w|). */
function closePer(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: ArrayLike<number>, what: string) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++)
    if (!(Math.abs(actual[i] - expected[i]) <= tol[i]))
      assert.fail(`${what}: element ${i}: got ${actual[i]}, expected ${expected[i]} (tolerance ${tol[i]})`);
}


/** Calls f(offsetA, offsetB, ..., linearIndex) for every index of `shape`. */
function forEachIndex(shape: number[], strides: number[][], f: (offs: number[], lin: number) => void) {
  const n = shape.reduce((a, b) => a * b, 1);
  const idx = new Array<number>(shape.length).fill(0);
  for (let lin = 0; lin < n; lin++) {
    let rem = lin;
    for (let d = shape.length - 1; d >= 0; d--) (idx[d] = rem % shape[d]), (rem = Math.floor(rem / shape[d]));
    f(strides.map((st) => idx.reduce((acc, i, d) => acc + i * st[d], 0)), lin);
  }
}

// ---------------------------------------------------------------------------------------------
// Process
// ---------------------------------------------------------------------------------------------

test("numThreads and cpuFeatures describe the pool and the kernels", () => {
  const n = nat.numThreads();
  assert.ok(Number.isInteger(n) && n >= 1);
  if (process.env.TSORCH_NUM_THREADS) assert.equal(n, Number(process.env.TSORCH_NUM_THREADS));
  const f = nat.cpuFeatures();
  assert.match(f, /kernels=(avx512|avx2|portable) int8=(avx512-vnni|avx-vnni|avx2|portable|off) bf16=(avx512-bf16|f32) clones=(x86-64-v4|x86-64-v3|baseline|none)$/);
  if (process.env.TSORCH_CPU_ISA === "portable") assert.match(f, /kernels=portable int8=portable bf16=f32 clones=/);
});

test("readBandwidth (bench/host.ts): one rate a read; under one 2 KB piece throws", () => {
  const r = nat.readBandwidth(4 * 1024 * 1024 + 100, 3);
  assert.equal(r.length, 3);
  for (const v of r) assert.ok(Number.isFinite(v) && v > 0, `rate ${v}`);
  assert.throws(() => nat.readBandwidth(2047, 1), /bytes/);
});

test("readBandwidthInCalls (bench/host.ts): whole-read rates, then rates of passes in the given calls; an empty list or a size under 1 throws", () => {
  const r = nat.readBandwidthInCalls(1024 * 1024, 3, [300 * 1024, 100, 2 * 1024 * 1024]);
  assert.equal(r.length, 6);
  for (const v of r) assert.ok(Number.isFinite(v) && v > 0, `rate ${v}`);
  assert.throws(() => nat.readBandwidthInCalls(1 << 20, 1, []), /'callBytes' must hold 1 to 100000 sizes, got 0/);
  assert.throws(() => nat.readBandwidthInCalls(1 << 20, 1, [4096, 0]), /callBytes/);
  // Sizes whose sum would overflow (or not fit the pool's piece count) are refused, not read.
  assert.throws(() => nat.readBandwidthInCalls(2048, 1, new Array(2048).fill(2 ** 53)), /'callBytes' must sum to at most 1099511627776 bytes/);
  // Calls adding up to more than the buffer wrap around it: a 1 MiB buffer read in 3 x 768 KiB.
  const w = nat.readBandwidthInCalls(1024 * 1024, 2, [768 * 1024, 768 * 1024, 768 * 1024]);
  assert.equal(w.length, 4);
  for (const v of w) assert.ok(Number.isFinite(v) && v > 0, `rate ${v}`);
});

test("decodeReadBandwidth (bench/host.ts): rates of one call and of calls of a set size, then a call's bytes; bad bits throw", () => {
  // 2 MiB of weight in calls of ~256 KiB, K = 1024: rows of 640 bytes (int4), 1152 (int8), 2048 (bfloat16).
  for (const [dtype, bits, row] of [[F32, 4, 640], [F32, 8, 1152], [BF16, 0, 2048]]) {
    const r = nat.decodeReadBandwidth(dtype, bits, 256 * 1024, 2 * 1024 * 1024, 2);
    assert.equal(r.length, 5);
    for (const v of r.slice(0, 4)) assert.ok(Number.isFinite(v) && v > 0, `bits ${bits}: rate ${v}`);
    assert.equal(r[4], Math.floor((256 * 1024) / row) * row);
  }
  assert.throws(() => nat.decodeReadBandwidth(F32, 3, 1 << 20, 1 << 20, 1), /bits must be 0 \(a float weight\), 8 or 4, got 3/);
  assert.throws(() => nat.decodeReadBandwidth(I32, 0, 1 << 20, 1 << 20, 1), /wDtype/);
});

test("decodeComputeRate (bench/host.ts): rates with W in cache, then each thread's whole rows of bytes; bad arguments throw", () => {
  // 64 KiB per thread, K = 1024: rows of 640 bytes (int4), 1152 (int8), 2048 (bfloat16), 4096 (float32).
  for (const [dtype, bits, row] of [[F32, 4, 640], [F32, 8, 1152], [BF16, 0, 2048], [F32, 0, 4096]]) {
    const r = nat.decodeComputeRate(dtype, bits, 64 * 1024, 2);
    assert.equal(r.length, 3);
    for (const v of r.slice(0, 2)) assert.ok(Number.isFinite(v) && v > 0, `bits ${bits}: rate ${v}`);
    assert.equal(r[2], Math.floor((64 * 1024) / row) * row);
  }
  // Fewer bytes than a row: one row.
  assert.equal(nat.decodeComputeRate(F32, 4, 100, 1)[1], 640);
  assert.throws(() => nat.decodeComputeRate(F32, 3, 1 << 16, 1), /bits must be 0 \(a float weight\), 8 or 4, got 3/);
  assert.throws(() => nat.decodeComputeRate(I32, 0, 1 << 16, 1), /wDtype/);
  assert.throws(() => nat.decodeComputeRate(F32, 4, 0, 1), /bytes/);
  assert.throws(() => nat.decodeComputeRate(F32, 4, 1 << 16, 0), /reps/);
});

test("hostStalls (bench/host.ts): each thread's gaps and lost seconds, then the gaps' median, p99 and largest, and the share all threads lost at once; bad arguments throw", () => {
  const T = nat.numThreads(), seconds = 0.02;
  // Gaps over 2 us: what the host took. A thread loses at most the call's time, in gaps of over 2 us.
  let t0 = performance.now();
  const r = nat.hostStalls(seconds, 2);
  let wall = (performance.now() - t0) / 1000;
  assert.equal(r.length, 2 * T + 5);
  assert.equal(r[0], T);
  for (let t = 0; t < T; t++) {
    const gaps = r[1 + 2 * t], lost = r[2 + 2 * t];
    assert.ok(Number.isInteger(gaps) && gaps >= 0, `thread ${t}: ${gaps} gaps`);
    assert.ok(lost >= gaps * 2e-6 && lost <= wall, `thread ${t}: ${lost} s lost in ${gaps} gaps, ${wall} s`);
  }
  const [med, p99, max] = r.slice(2 * T + 1);
  // The share all threads lost at once: NaN where a task ran after another's (no common span).
  const shared = r[2 * T + 4];
  if (r.some((_, i) => i > 0 && i <= 2 * T && i % 2 === 1 && r[i] > 0)) {
    assert.ok(med > 2 && med <= p99 && p99 <= max, `${med} ${p99} ${max}`);
    // With one thread every gap is every thread's; with more, a share of the time.
    if (T === 1) assert.equal(shared, 1);
    else assert.ok(Number.isNaN(shared) || (shared >= 0 && shared <= 1), `shared ${shared}`);
  } else {
    assert.deepEqual([med, p99, max], [0, 0, 0]);
    assert.ok(shared === 0 || Number.isNaN(shared), `shared ${shared}`);
  }
  // No threshold: every interval between two clock reads is a gap, so each thread's gaps add up to
  // all the time it spun (at least `seconds`; a clock read takes well under a microsecond).
  t0 = performance.now();
  const all = nat.hostStalls(seconds, 0);
  wall = (performance.now() - t0) / 1000;
  for (let t = 0; t < T; t++) {
    assert.ok(all[1 + 2 * t] >= 1, `thread ${t}: ${all[1 + 2 * t]} reads`);
    assert.ok(all[2 + 2 * t] >= seconds * 0.999 && all[2 + 2 * t] <= wall, `thread ${t}: ${all[2 + 2 * t]} s of ${wall}`);
  }
  assert.ok(all[2 * T + 1] < 1, `median interval ${all[2 * T + 1]} us`);
  // ... and over the span every task recorded, every thread is inside a gap all the time: all of
  // the lost time is shared, exactly (clock ticks), unless the tasks ran one after another.
  const sharedAll = all[2 * T + 4];
  if (T === 1) assert.equal(sharedAll, 1);
  else assert.ok(sharedAll === 1 || Number.isNaN(sharedAll), `shared ${sharedAll} with no threshold`);
  assert.throws(() => nat.hostStalls(0, 2), /seconds must be in \(0, 10\], got 0/);
  assert.throws(() => nat.hostStalls(11, 2), /seconds/);
  assert.throws(() => nat.hostStalls(0.01, -1), /minGapUs must be in \[0, 1e6\], got -1/);
  assert.throws(() => nat.hostStalls(Number.NaN, 2), RangeError);
  assert.throws(() => nat.hostStalls(0.01, Number.NaN), /minGapUs/);
});

test("direct float GEMVs of 2-8 rows split over the pool round each column the same every call: linearGroup equals linear bit for bit", { skip: gemmTablesSkip }, () => {
  // The direct kernels compute columns in tiles (3 columns on AVX2, 4 elsewhere) counted from where
  // a piece begins, and a tile's columns round differently from single ones: pieces that began
  // anywhere but at direct_granule multiples (they depend on timing) changed results from call to
  // call on AVX2. N leaves a tail past every tile and granule.
  const r = rng(11);
  const K = 256, N = 4096 + 16 * 7;
  const w0 = randn(N * K, r), w1 = randn(N * K, r);
  for (const M of [3, 8]) {
    const x = randn(M * K, r);
    const lin = (w: Float32Array) => {
      const o = new Float32Array(M * N);
      nat.linear(x, w, F32, null, 0, o, M, N, K);
      return o;
    };
    const ref0 = lin(w0), ref1 = lin(w1);
    for (let call = 0; call < 20; call++) {
      assert.deepEqual(lin(w0), ref0, `M = ${M}: linear call ${call} differs from the first`);
      const o0 = new Float32Array(M * N), o1 = new Float32Array(M * N);
      nat.linearGroup(x, M, K, null, 0, 0, 0, 2, w0, F32, N, o0, w1, F32, N, o1, null, 0, 0, null, null, 0, null, null, null, 0);
      assert.deepEqual(o0, ref0, `M = ${M}: linearGroup's first product differs from linear (call ${call})`);
      assert.deepEqual(o1, ref1, `M = ${M}: linearGroup's second product differs from linear (call ${call})`);
    }
  }
});

const hasAvx2 = /\bavx2\b/.test(nat.cpuFeatures());
test("the avx2 kernels pass this file too (child process, 2 threads)", { skip: process.env.TSORCH_CPU_ISA ? true : !hasAvx2 && "this host has no AVX2" }, () => {
  const env: NodeJS.ProcessEnv = { ...process.env, TSORCH_CPU_ISA: "avx2", TSORCH_NUM_THREADS: "2" };
  delete env.NODE_TEST_CONTEXT;
  const r = spawnSync(process.execPath, ["--test", fileURLToPath(import.meta.url)], { env, encoding: "utf8" });
  assert.equal(r.status, 0, `child run failed:\n${r.stdout}\n${r.stderr}`);
});

test("the portable kernels pass this file too (child process, 3 threads)", { skip: !!process.env.TSORCH_CPU_ISA }, () => {
  const env: NodeJS.ProcessEnv = { ...process.env, TSORCH_CPU_ISA: "portable", TSORCH_NUM_THREADS: "3" };
  // Inherited from our own `node --test` parent, it would make the child always exit 0.
  delete env.NODE_TEST_CONTEXT;
  const r = spawnSync(process.execPath, ["--test", fileURLToPath(import.meta.url)], { env, encoding: "utf8" });
  assert.equal(r.status, 0, `child run failed:\n${r.stdout}\n${r.stderr}`);
});

// ---------------------------------------------------------------------------------------------
// copy
// ---------------------------------------------------------------------------------------------

test("copy: strided and broadcast float32", () => {
  const r = rng(1);
  const src = randn(7 * 33, r);
  const dst = new Float32Array(7 * 33);
  // Transpose: read src [33, 7] as [7, 33].
  nat.copy(src, F32, [1, 7], dst, F32, [33, 1], [7, 33]);
  for (let i = 0; i < 7; i++) for (let j = 0; j < 33; j++) assert.equal(dst[i * 33 + j], src[j * 7 + i]);
  // Broadcast a row over 5 rows, writing into a strided destination (every other column).
  const row = randn(3, r);
  const out = new Float32Array(5 * 6).fill(-7);
  nat.copy(row, F32, [0, 1], out, F32, [6, 2], [5, 3]);
  for (let i = 0; i < 5; i++)
    for (let j = 0; j < 6; j++) assert.equal(out[i * 6 + j], j % 2 === 0 ? row[j / 2] : -7);
  // Rank 0 and empty shapes.
  const one = new Float32Array(1);
  nat.copy(Float32Array.of(2.5), F32, [], one, F32, [], []);
  assert.equal(one[0], 2.5);
  nat.copy(new Float32Array(0), F32, [0, 1], new Float32Array(0), F32, [5, 1], [0, 5]);
});

test("copy: a large permuted copy (parallel path)", () => {
  const [A, B, C] = [37, 129, 67];
  const src = randn(A * B * C, rng(2));
  const dst = new Float32Array(A * B * C);
  // dst[c, a, b] = src[a, b, c]
  nat.copy(src, F32, [B * C, C, 1], dst, F32, [B, 1, A * B], [A, B, C]);
  for (let a = 0; a < A; a += 5)
    for (let b = 0; b < B; b += 3)
      for (let c = 0; c < C; c++) assert.equal(dst[c * A * B + a * B + b], src[a * B * C + b * C + c]);
  const flat = new Float32Array(A * B * C);
  nat.copy(src, F32, [1], flat, F32, [1], [A * B * C]);
  assert.deepEqual(flat, src);
});

test("copy: bfloat16 conversions round to nearest even", () => {
  const r = rng(3);
  const vals = randn(1000, r, -1e4, 1e4);
  // Ties: 1 + 2^-8 sits halfway between 1 and 1 + 2^-7 (goes to 1, even); 1 + 3*2^-8 goes up.
  const special = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 0, -0, Infinity, -Infinity, NaN, 3.0e38, 1e-40];
  const x = new Float32Array([...vals, ...special]);
  const out = new Uint16Array(x.length);
  nat.copy(x, F32, [1], out, BF16, [1], [x.length]);
  for (let i = 0; i < x.length; i++) {
    if (Number.isNaN(x[i])) assert.ok(Number.isNaN(bf16ToF32(out[i])), "NaN stays NaN");
    else assert.equal(out[i], f32ToBf16(x[i]), `bf16 of ${x[i]}`);
  }
  assert.equal(out[vals.length], 0x3f80);
  assert.equal(out[vals.length + 1], 0x3f82);
  const back = new Float32Array(x.length);
  nat.copy(out, BF16, [1], back, F32, [1], [x.length]);
  for (let i = 0; i < x.length; i++) assert.ok(Object.is(back[i], bf16ToF32(out[i])) || Number.isNaN(back[i]));
});

test("copy: float16 conversions, every half value and every tie", () => {
  // Every bit pattern decodes exactly.
  const all = new Uint16Array(65536).map((_, i) => i);
  const dec = new Float32Array(65536);
  nat.copy(all, F16, [1], dec, F32, [1], [65536]);
  for (let h = 0; h < 65536; h++) {
    const e = f16ToF32(h);
    if (Number.isNaN(e)) assert.ok(Number.isNaN(dec[h]), `f16 ${h} is NaN`);
    else assert.ok(Object.is(dec[h], Math.fround(e)), `f16 0x${h.toString(16)}: ${dec[h]} vs ${e}`);
  }
  // Midpoints between neighbouring positive halves (ties), values just around them, and specials.
  const xs: number[] = [];
  for (let h = 0; h < 0x7c00; h++) {
    const mid = Math.fround((f16ToF32(h) + f16ToF32(h + 1)) / 2);
    xs.push(mid, -mid, fromBits(bitsOf(mid) + 1), fromBits(bitsOf(mid) - 1));
  }
  xs.push(65504, 65519.996, 65520, 1e6, -1e6, Infinity, -Infinity, NaN, 1e-8, 2 ** -25, 2 ** -24, -0, 0);
  const x = Float32Array.from(xs);
  const enc = new Uint16Array(x.length);
  nat.copy(x, F32, [1], enc, F16, [1], [x.length]);
  for (let i = 0; i < x.length; i++) {
    if (Number.isNaN(x[i])) assert.ok(Number.isNaN(f16ToF32(enc[i])));
    else assert.equal(enc[i], f32ToF16(x[i]), `f16 of ${x[i]}: got 0x${enc[i].toString(16)}`);
  }
});

test("copy: integer, bool and cross conversions", () => {
  const x = Float32Array.of(-2.7, 2.7, -0.5, 0, 3e9, -3e9, NaN, 1);
  const i32 = new Int32Array(x.length);
  nat.copy(x, F32, [1], i32, I32, [1], [x.length]);
  assert.deepEqual([...i32], [-2, 2, 0, 0, 2147483647, -2147483648, 0, 1]);
  const b = new Uint8Array(x.length);
  nat.copy(x, F32, [1], b, BOOL, [1], [x.length]);
  assert.deepEqual([...b], [1, 1, 1, 0, 1, 1, 1, 1]);
  const big = BigInt64Array.of(2n ** 40n + 5n, -3n, 7n);
  const narrow = new Int32Array(3);
  nat.copy(big, I64, [1], narrow, I32, [1], [3]);
  assert.deepEqual([...narrow], [5, -3, 7]);
  const asF = new Float32Array(3);
  nat.copy(big, I64, [1], asF, F32, [1], [3]);
  assert.deepEqual([...asF], [Math.fround(2 ** 40 + 5), -3, 7]);
  const wide = new BigInt64Array(3);
  nat.copy(Int32Array.of(-1, 0, 9), I32, [1], wide, I64, [1], [3]);
  assert.deepEqual([...wide], [-1n, 0n, 9n]);
  const fromBool = new Uint16Array(3);
  nat.copy(Uint8Array.of(0, 1, 1), BOOL, [1], fromBool, BF16, [1], [3]);
  assert.deepEqual([...fromBool].map(bf16ToF32), [0, 1, 1]);
  // A byte view at an offset: element 0 is at the view's byteOffset.
  const backing = new Uint8Array(64);
  const view = new Uint8Array(backing.buffer, 8, 16);
  nat.copy(Float32Array.of(1, 2, 3, 4), F32, [1], view, F32, [1], [4]);
  assert.deepEqual([...new Float32Array(backing.buffer, 8, 4)], [1, 2, 3, 4]);
  assert.deepEqual([...backing.subarray(0, 8)], [0, 0, 0, 0, 0, 0, 0, 0]);
});

// ---------------------------------------------------------------------------------------------
// unary / binary / where
// ---------------------------------------------------------------------------------------------

/** erf by its Taylor series (plenty accurate for |x| <= 3). */
function erf(x: number): number {
  let sum = 0, term = x;
  for (let n = 0; n < 80; n++) {
    sum += term / (2 * n + 1);
    term *= (-x * x) / (n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

test("unary: every op", () => {
  const refs: Record<keyof typeof UNARY, (x: number) => number> = {
    neg: (x) => -x, exp: Math.exp, log: Math.log, sqrt: Math.sqrt, rsqrt: (x) => 1 / Math.sqrt(x),
    tanh: Math.tanh, sigmoid: (x) => 1 / (1 + Math.exp(-x)), silu: (x) => x / (1 + Math.exp(-x)),
    gelu: (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)),
    gelu_tanh: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))),
    abs: Math.abs, sin: Math.sin, cos: Math.cos, relu: (x) => Math.max(x, 0),
    softplus: (x) => (x > 20 ? x : Math.log1p(Math.exp(x))), reciprocal: (x) => 1 / x,
    square: (x) => x * x, erf,
  };
  const r = rng(4);
  for (const [name, op] of Object.entries(UNARY) as [keyof typeof UNARY, number][]) {
    const positive = name === "log" || name === "sqrt" || name === "rsqrt" || name === "reciprocal";
    const n = name === "silu" ? 70000 : 1031; // one op large enough for the parallel path
    const x = positive ? randn(n, r, 0.05, 4) : randn(n, r, -3, 3);
    const out = new Float32Array(n);
    nat.unary(op, x, out, n);
    close(out, Array.from(x, refs[name]), 2e-6, 4e-6, name);
  }
  // out may alias x.
  const x = Float32Array.of(-1, 2, -3);
  nat.unary(UNARY.neg, x, x, 3);
  assert.deepEqual([...x], [1, -2, 3]);
  const sp = new Float32Array(1);
  nat.unary(UNARY.softplus, Float32Array.of(50), sp, 1);
  assert.equal(sp[0], 50);
});

test("unary: silu and sigmoid over the whole float range (a vectorized e^x): float64's values within 4 ulps, special values as torch's", () => {
  const refs = { silu: (x: number) => x / (1 + Math.exp(-x)), sigmoid: (x: number) => 1 / (1 + Math.exp(-x)) };
  const n = 100003; // not a multiple of any vector width
  const x = Float32Array.from({ length: n }, (_, i) => (i / n - 0.5) * 240); // [-120, 120]: saturated ends, denormal results
  const specials = Float32Array.of(NaN, Infinity, -Infinity, 0, -0, 88.7, -88.7, 103, -103, 1e-30, -1e-30);
  for (const name of ["silu", "sigmoid"] as const) {
    const out = new Float32Array(n);
    nat.unary(UNARY[name], x, out, n);
    let worst = 0;
    for (let i = 0; i < n; i++) {
      const want = refs[name](x[i]);
      worst = Math.max(worst, Math.abs(out[i] - want) / Math.max(Math.abs(want), 1e-30));
    }
    assert.ok(worst < 4 * 2 ** -23, `${name}: max relative error ${worst}`);
    const sp = new Float32Array(specials.length);
    nat.unary(UNARY[name], specials, sp, specials.length);
    const want = Array.from(specials, (v) => Math.fround(refs[name](v)));
    for (let i = 0; i < specials.length; i++) {
      const ok = Object.is(sp[i], want[i]) || (Number.isNaN(want[i]) ? Number.isNaN(sp[i]) : Math.abs(sp[i] - want[i]) <= 4 * 2 ** -23 * Math.abs(want[i]) + 1e-37);
      assert.ok(ok, `${name}(${specials[i]}) = ${sp[i]}, want ${want[i]}`);
    }
    // A value's result does not depend on where it sits (vector body or tail).
    for (const len of [1, 5, 17, 33]) {
      const part = new Float32Array(len);
      nat.unary(UNARY[name], x.subarray(1000, 1000 + len), part, len);
      assert.deepEqual(Array.from(part), Array.from(out.subarray(1000, 1000 + len)), `${name}: ${len} values alone`);
    }
  }
});

test("binary: float32 arithmetic with broadcasting", () => {
  const r = rng(5);
  const shape = [3, 4, 5];
  const a = randn(3 * 1 * 5, r, -2, 2), b = randn(4 * 5, r, 0.5, 2);
  const aStr = [5, 0, 1], bStr = [0, 5, 1]; // a [3, 1, 5], b [1, 4, 5]
  const refs: [keyof typeof BINARY, (x: number, y: number) => number][] = [
    ["add", (x, y) => x + y], ["sub", (x, y) => x - y], ["mul", (x, y) => x * y], ["div", (x, y) => x / y],
    ["maximum", Math.max], ["minimum", Math.min], ["pow", (x, y) => Math.abs(x) ** y],
  ];
  for (const [name, f] of refs) {
    const aa = name === "pow" ? a.map(Math.abs) : a;
    const out = new Float32Array(60);
    nat.binary(BINARY[name], F32, aa, aStr, b, bStr, out, shape);
    const exp = new Float64Array(60);
    forEachIndex(shape, [aStr, bStr], ([ia, ib], lin) => (exp[lin] = f(aa[ia], b[ib])));
    close(out, exp, 1e-6, 1e-6, name);
  }
  const m = new Float32Array(2);
  nat.binary(BINARY.maximum, F32, Float32Array.of(NaN, 1), [1], Float32Array.of(0, NaN), [1], m, [2]);
  assert.ok(Number.isNaN(m[0]) && Number.isNaN(m[1]), "maximum propagates NaN");
});

test("binary: comparisons and logical ops write bool", () => {
  const a = Float32Array.of(1, 2, 3, NaN), b = Float32Array.of(2);
  const cmp: [keyof typeof BINARY, number[]][] = [
    ["eq", [0, 1, 0, 0]], ["ne", [1, 0, 1, 1]], ["lt", [1, 0, 0, 0]], ["le", [1, 1, 0, 0]],
    ["gt", [0, 0, 1, 0]], ["ge", [0, 1, 1, 0]],
  ];
  for (const [name, exp] of cmp) {
    const out = new Uint8Array(4);
    nat.binary(BINARY[name], F32, a, [1], b, [0], out, [4]);
    assert.deepEqual([...out], exp, name);
  }
  const out = new Uint8Array(4);
  const p = Uint8Array.of(0, 0, 1, 1), q = Uint8Array.of(0, 1, 0, 1);
  nat.binary(BINARY.logical_and, BOOL, p, [1], q, [1], out, [4]);
  assert.deepEqual([...out], [0, 0, 0, 1]);
  nat.binary(BINARY.logical_or, BOOL, p, [1], q, [1], out, [4]);
  assert.deepEqual([...out], [0, 1, 1, 1]);
  const i = new Uint8Array(3);
  nat.binary(BINARY.lt, I64, BigInt64Array.of(-5n, 5n, 2n ** 40n), [1], BigInt64Array.of(0n), [0], i, [3]);
  assert.deepEqual([...i], [1, 0, 0]);
});

test("binary: integer arithmetic truncates, wraps and rejects division by zero", () => {
  const a = Int32Array.of(7, -7, 7, -7, -2147483648, 2147483647);
  const b = Int32Array.of(2, 2, -2, -2, -1, 1);
  const out = new Int32Array(6);
  nat.binary(BINARY.div, I32, a, [1], b, [1], out, [6]);
  assert.deepEqual([...out], [3, -3, -3, 3, -2147483648, 2147483647]);
  nat.binary(BINARY.add, I32, a, [1], b, [1], out, [6]);
  assert.deepEqual([...out], [9, -5, 5, -9, 2147483647, -2147483648]);
  const o64 = new BigInt64Array(2);
  nat.binary(BINARY.mul, I64, BigInt64Array.of(3n, -(2n ** 40n)), [1], BigInt64Array.of(-4n), [0], o64, [2]);
  assert.deepEqual([...o64], [-12n, 2n ** 42n]);
  assert.throws(() => nat.binary(BINARY.div, I32, Int32Array.of(1, 2), [1], Int32Array.of(1, 0), [1], new Int32Array(2), [2]),
    (e: Error) => e instanceof RangeError && /division by zero/.test(e.message));
  assert.throws(() => nat.binary(BINARY.pow, I32, a, [1], b, [1], out, [6]), TypeError);
  assert.throws(() => nat.binary(BINARY.logical_and, F32, new Float32Array(1), [1], new Float32Array(1), [1], new Uint8Array(1), [1]), TypeError);
});

test("where: broadcast over three operands, several dtypes", () => {
  const r = rng(6);
  const shape = [4, 7];
  const cond = Uint8Array.from({ length: 7 }, () => (r() < 0.5 ? 1 : 0)); // [1, 7]
  const a = randn(4, r); // [4, 1]
  const b = randn(28, r);
  const out = new Float32Array(28);
  nat.where(cond, [0, 1], a, [1, 0], b, [7, 1], F32, out, shape);
  forEachIndex(shape, [[0, 1], [1, 0], [7, 1]], ([ic, ia, ib], lin) => assert.equal(out[lin], cond[ic] ? a[ia] : b[ib]));
  const a16 = toBf16(a), b16 = toBf16(b), o16 = new Uint16Array(28);
  nat.where(cond, [0, 1], a16, [1, 0], b16, [7, 1], BF16, o16, shape);
  forEachIndex(shape, [[0, 1], [1, 0], [7, 1]], ([ic, ia, ib], lin) => assert.equal(o16[lin], cond[ic] ? a16[ia] : b16[ib]));
  const o64 = new BigInt64Array(3);
  nat.where(Uint8Array.of(1, 0, 1), [1], BigInt64Array.of(1n, 2n, 3n), [1], BigInt64Array.of(-1n), [0], I64, o64, [3]);
  assert.deepEqual([...o64], [1n, -1n, 3n]);
});

// ---------------------------------------------------------------------------------------------
// reduce / cumsum / softmax
// ---------------------------------------------------------------------------------------------

test("reduce: every op on float32 and ints", () => {
  const r = rng(7);
  const [outer, n] = [5, 33];
  const x = randn(outer * n, r);
  x[2 * n + 4] = x[2 * n + 9] = 5; // tie for argmax: first index wins
  const rows = Array.from({ length: outer }, (_, i) => Array.from(x.subarray(i * n, (i + 1) * n)));
  const fo = new Float32Array(outer), io = new BigInt64Array(outer);
  const expectF: [keyof typeof REDUCE, (v: number[]) => number][] = [
    ["sum", (v) => v.reduce((a, b) => a + b, 0)], ["mean", (v) => v.reduce((a, b) => a + b, 0) / v.length],
    ["max", (v) => Math.max(...v)], ["min", (v) => Math.min(...v)], ["prod", (v) => v.reduce((a, b) => a * b, 1)],
  ];
  for (const [name, f] of expectF) {
    nat.reduce(REDUCE[name], x, F32, fo, outer, n);
    close(fo, rows.map(f), 1e-6, 1e-6, name);
  }
  nat.reduce(REDUCE.argmax, x, F32, io, outer, n);
  assert.deepEqual([...io].map(Number), rows.map((v) => v.indexOf(Math.max(...v))));
  assert.equal(io[2], 4n);
  nat.reduce(REDUCE.argmin, x, F32, io, outer, n);
  assert.deepEqual([...io].map(Number), rows.map((v) => v.indexOf(Math.min(...v))));
  // NaN wins max/argmax.
  const withNan = Float32Array.of(1, NaN, 3);
  nat.reduce(REDUCE.argmax, withNan, F32, io, 1, 3);
  assert.equal(io[0], 1n);
  // Rows longer than the 16-lane pass: ties across lanes and the tail, the first NaN wherever it
  // lies; rows of a vocabulary's length (one row >= 65536 is scanned in pieces over the pool):
  // ties and NaNs in different pieces, the extremum in the last piece's tail.
  const long = (edit: (v: Float32Array) => void, n = 1000) => { const v = randn(n, r); edit(v); return v; };
  const firstNan = (v: Float32Array) => v.findIndex(Number.isNaN);
  const V = 151_937;
  const cases = [
    long((v) => { v[997] = v[37] = v[500] = 9; }), long((v) => { v[999] = 9; }), long((v) => { v[0] = NaN; }),
    long((v) => { v[3] = 9; v[998] = NaN; v[999] = NaN; }), long((v) => { v[600] = NaN; v[17] = NaN; }), long((v) => v.fill(-Infinity)),
    long((v) => { v[V - 1] = 9; v[100] = -9; }, V), long((v) => { v[120_000] = v[5] = v[80_000] = 9; v[140_000] = v[70_000] = -9; }, V),
    long((v) => { v[2] = 9; v[150_000] = NaN; }, V), long((v) => { v[149_999] = NaN; v[76_000] = NaN; }, V), long((v) => v.fill(-Infinity), V),
  ];
  for (const v of cases) {
    nat.reduce(REDUCE.argmax, v, F32, io, 1, v.length);
    const arr = Array.from(v), hi = arr.reduce((a, b) => Math.max(a, b)), lo = arr.reduce((a, b) => Math.min(a, b));
    assert.equal(Number(io[0]), firstNan(v) >= 0 ? firstNan(v) : arr.indexOf(hi));
    nat.reduce(REDUCE.argmin, v, F32, io, 1, v.length);
    assert.equal(Number(io[0]), firstNan(v) >= 0 ? firstNan(v) : arr.indexOf(lo));
    nat.reduce(REDUCE.max, v, F32, fo, 1, v.length);
    assert.ok(Object.is(fo[0], firstNan(v) >= 0 ? NaN : hi));
  }
  // Integers: sums are int64, max keeps the dtype.
  const xi = Int32Array.of(2147483647, 1, -5, 3);
  const s = new BigInt64Array(2);
  nat.reduce(REDUCE.sum, xi, I32, s, 2, 2);
  assert.deepEqual([...s], [2147483648n, -2n]);
  const mx = new Int32Array(2);
  nat.reduce(REDUCE.max, xi, I32, mx, 2, 2);
  assert.deepEqual([...mx], [2147483647, 3]);
  nat.reduce(REDUCE.prod, BigInt64Array.of(3n, -4n, 5n), I64, s, 1, 3);
  assert.equal(s[0], -60n);
  assert.throws(() => nat.reduce(REDUCE.mean, xi, I32, s, 2, 2), TypeError);
  assert.throws(() => nat.reduce(REDUCE.max, new Float32Array(0), F32, fo, 3, 0), RangeError);
  nat.reduce(REDUCE.sum, new Float32Array(0), F32, fo, 3, 0);
  assert.deepEqual([...fo.subarray(0, 3)], [0, 0, 0]);
});

test("reduce: a large sum (parallel rows)", () => {
  const [outer, n] = [64, 4099];
  const x = randn(outer * n, rng(8));
  const out = new Float32Array(outer);
  nat.reduce(REDUCE.sum, x, F32, out, outer, n);
  const exp = Array.from({ length: outer }, (_, i) => x.subarray(i * n, (i + 1) * n).reduce((a, b) => a + b, 0));
  close(out, exp, 1e-5, 1e-6, "sum");
});

test("cumsum: float32 and int64", () => {
  const x = randn(3 * 130, rng(9));
  const out = new Float32Array(x.length);
  nat.cumsum(x, F32, out, 3, 130);
  const exp = new Float64Array(x.length);
  for (let r = 0; r < 3; r++) for (let i = 0, s = 0; i < 130; i++) exp[r * 130 + i] = s += x[r * 130 + i];
  close(out, exp, 1e-5, 1e-6, "cumsum");
  const xi = BigInt64Array.of(1n, 2n, 3n, 10n, -20n, 30n), oi = new BigInt64Array(6);
  nat.cumsum(xi, I64, oi, 2, 3);
  assert.deepEqual([...oi], [1n, 3n, 6n, 10n, -10n, 20n]);
});

function softmaxRef(row: number[], log: boolean): number[] {
  const mx = Math.max(...row);
  if (mx === -Infinity) return row.map(() => (log ? -Infinity : 0));
  const e = row.map((v) => Math.exp(v - mx));
  const s = e.reduce((a, b) => a + b, 0);
  return log ? row.map((v) => v - mx - Math.log(s)) : e.map((v) => v / s);
}

test("softmax and log_softmax, with -inf entries and all -inf rows", () => {
  const [rows, n] = [6, 33];
  const x = randn(rows * n, rng(10), -5, 5);
  x[3] = x[40] = -Infinity;
  x.fill(-Infinity, 2 * n, 3 * n);
  for (const log of [0, 1]) {
    const out = new Float32Array(rows * n);
    nat.softmax(x, out, rows, n, log);
    const exp = Array.from({ length: rows }, (_, r) => softmaxRef(Array.from(x.subarray(r * n, (r + 1) * n)), log === 1)).flat();
    close(out, exp, 1e-6, 1e-5, log ? "log_softmax" : "softmax");
  }
  const big = randn(40 * 1000, rng(11), -5, 5), out = new Float32Array(40 * 1000);
  nat.softmax(big, out, 40, 1000, 0);
  close(out.subarray(39000), softmaxRef(Array.from(big.subarray(39000)), false), 1e-7, 1e-5, "softmax rows");
});

// ---------------------------------------------------------------------------------------------
// linear / matmul
// ---------------------------------------------------------------------------------------------

type WeightDtype = "float32" | "float16" | "bfloat16";

/** Weight values (as the kernel sees them) and the buffer holding them in `dtype`. */
function weights(w: Float32Array, dtype: WeightDtype): [Float32Array, ArrayBufferView] {
  if (dtype === "float32") return [w, w];
  const enc = dtype === "float16" ? toF16(w) : toBf16(w);
  const dec = Float32Array.from(enc, dtype === "float16" ? f16ToF32 : bf16ToF32);
  return [dec, enc];
}

function linearRef(x: Float32Array, w: Float32Array, bias: Float32Array | null, M: number, N: number, K: number) {
  const out = new Float64Array(M * N), tol = new Float64Array(M * N);
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let s = bias ? bias[n] : 0, a = bias ? Math.abs(bias[n]) : 0;
      for (let k = 0; k < K; k++) (s += x[m * K + k] * w[n * K + k]), (a += Math.abs(x[m * K + k] * w[n * K + k]));
      out[m * N + n] = s;
      tol[m * N + n] = 2e-6 * a + 1e-6;
    }
  return { out, tol };
}

/**
 * The activations a linear with `dt` weights multiplies at M rows: rounded to bfloat16 where the
 * host's bf16 dot-product GEMM takes bfloat16 weights (M >= 2, cpuFeatures "bf16=avx512-bf16").
 */
function linearInput(x: Float32Array, dt: string, M: number): Float32Array {
  const bf16Dot = /\bbf16=avx512-bf16\b/.test(nat.cpuFeatures());
  return bf16Dot && dt === "bfloat16" && M >= 2 ? x.map((v) => roundFloat(v, "bfloat16")) : x;
}

test("linear: all weight dtypes, with and without bias, odd sizes through every kernel path", { skip: gemmTablesSkip }, () => {
  const r = rng(12);
  // (M, N, K): GEMV, small-M direct kernel, packed kernel with row/column/depth tails, threads.
  const sizes = [[1, 1, 1], [1, 33, 7], [1, 130, 1024], [3, 7, 33], [8, 17, 64], [9, 33, 257],
    [33, 130, 300], [130, 67, 65], [1, 512, 1024], [64, 96, 128]];
  const dtypes: WeightDtype[] = ["float32", "float16", "bfloat16"];
  for (const [M, N, K] of sizes)
    for (const dt of dtypes)
      for (const withBias of [false, true]) {
        const x = randn(M * K, r);
        const [w, wbuf] = weights(randn(N * K, r), dt);
        const biasDt: WeightDtype = dt === "float32" ? "float32" : dt === "float16" ? "bfloat16" : "float16";
        const [bias, bbuf] = weights(randn(N, r), biasDt);
        const out = new Float32Array(M * N);
        nat.linear(x, wbuf, DTYPE_CODE[dt], withBias ? bbuf : null, DTYPE_CODE[biasDt], out, M, N, K);
        const ref = linearRef(linearInput(x, dt, M), w, withBias ? bias : null, M, N, K);
        closePer(out, ref.out, ref.tol, `linear M=${M} N=${N} K=${K} ${dt} bias=${withBias}`);
      }
});

test("linear: K = 0 gives the bias; buffers at byte offsets", { skip: gemmTablesSkip }, () => {
  const out = new Float32Array(6).fill(9);
  nat.linear(new Float32Array(0), new Float32Array(0), F32, Float32Array.of(1, 2, 3), F32, out, 2, 3, 0);
  assert.deepEqual([...out], [1, 2, 3, 1, 2, 3]);
  const r = rng(13);
  const [M, N, K] = [2, 5, 19];
  const x = randn(M * K, r), w = randn(N * K, r);
  const backing = new Uint8Array(4 + 4 * M * K);
  new Float32Array(backing.buffer, 4, M * K).set(x);
  const wb = toBf16(w);
  const wback = new Uint8Array(2 + 2 * N * K);
  new Uint16Array(wback.buffer, 2, N * K).set(wb);
  const o = new Float32Array(M * N);
  nat.linear(backing.subarray(4), wback.subarray(2), BF16, null, 0, o, M, N, K);
  const ref = linearRef(linearInput(x, "bfloat16", M), Float32Array.from(wb, bf16ToF32), null, M, N, K);
  closePer(o, ref.out, ref.tol, "linear at offsets");
});

test("matmul: batched, transposed and broadcast operands", { skip: gemmTablesSkip }, () => {
  const r = rng(14);
  for (const [batch, M, N, K] of [[3, 1, 7, 5], [2, 5, 33, 17], [3, 40, 37, 70], [1, 1, 1, 1]]) {
    // a stored as [batch, K, M] (so as2 = M), b as [batch, N, K] (transposed, bs1 = 1), or b
    // shared across the batch (bs0 = 0) and contiguous [K, N].
    const a = randn(batch * K * M, r);
    const as = [K * M, 1, M];
    for (const [bs, blen] of [[[N * K, 1, K], batch * N * K], [[0, N, 1], K * N]] as [number[], number][]) {
      const b = randn(blen, r);
      const out = new Float32Array(batch * M * N);
      nat.matmul(a, as, b, bs, out, batch, M, N, K);
      const exp = new Float64Array(batch * M * N), tol = new Float64Array(batch * M * N);
      for (let i = 0; i < batch; i++)
        for (let m = 0; m < M; m++)
          for (let n = 0; n < N; n++) {
            let s = 0, t = 0;
            for (let k = 0; k < K; k++) {
              const p = a[i * as[0] + m * as[1] + k * as[2]] * b[i * bs[0] + k * bs[1] + n * bs[2]];
              (s += p), (t += Math.abs(p));
            }
            exp[(i * M + m) * N + n] = s;
            tol[(i * M + m) * N + n] = 2e-6 * t + 1e-6;
          }
      closePer(out, exp, tol, `matmul ${batch}x${M}x${N}x${K} bs=${bs}`);
    }
  }
});

// ---------------------------------------------------------------------------------------------
// sdpa
// ---------------------------------------------------------------------------------------------

interface Attn {
  B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  scale: number; softcap: number; causalOffset: number; window: number;
  q: Float32Array; qs: number[]; k: Float32Array; ks: number[]; v: Float32Array; vs: number[];
  mask: Float32Array | null; ms: number[];
}

function sdpaRef(a: Attn): Float64Array {
  const out = new Float64Array(a.B * a.Lq * a.Hq * a.Dv);
  const group = a.Hq / a.Hkv;
  for (let b = 0; b < a.B; b++)
    for (let h = 0; h < a.Hq; h++) {
      const g = Math.floor(h / group);
      for (let i = 0; i < a.Lq; i++) {
        const s = new Array<number>(a.Lk);
        for (let j = 0; j < a.Lk; j++) {
          const masked = a.causalOffset >= 0 &&
            (j > i + a.causalOffset || (a.window > 0 && j <= i + a.causalOffset - a.window));
          if (masked) { s[j] = -Infinity; continue; }
          let dot = 0;
          for (let d = 0; d < a.D; d++)
            dot += a.q[b * a.qs[0] + h * a.qs[1] + i * a.qs[2] + d * a.qs[3]] *
              a.k[b * a.ks[0] + g * a.ks[1] + j * a.ks[2] + d * a.ks[3]];
          let v = dot * a.scale;
          if (a.softcap > 0) v = a.softcap * Math.tanh(v / a.softcap);
          if (a.mask) v += a.mask[b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + j];
          s[j] = v;
        }
        const p = softmaxRef(s, false);
        for (let e = 0; e < a.Dv; e++) {
          let acc = 0;
          for (let j = 0; j < a.Lk; j++)
            if (p[j] !== 0) acc += p[j] * a.v[b * a.vs[0] + g * a.vs[1] + j * a.vs[2] + e * a.vs[3]];
          out[((b * a.Lq + i) * a.Hq + h) * a.Dv + e] = acc;
        }
      }
    }
  return out;
}

/** Random q, k, v in the given memory layouts ("bhld" = contiguous [B, H, L, D]; "blhd" =
 * [B, L, H, D] memory read as [B, H, L, D]; "bhdl" = D-major keys). */
function makeAttn(r: () => number, p: Omit<Attn, "q" | "qs" | "k" | "ks" | "v" | "vs" | "mask" | "ms">,
  layout: "bhld" | "blhd" | "bhdl", mask: "none" | "full" | "broadcast"): Attn {
  const strides = (H: number, L: number, D: number): number[] =>
    layout === "bhld" ? [H * L * D, L * D, D, 1] : layout === "blhd" ? [L * H * D, D, H * D, 1] : [H * D * L, D * L, 1, L];
  const q = randn(p.B * p.Hq * p.Lq * p.D, r), k = randn(p.B * p.Hkv * p.Lk * p.D, r);
  const v = randn(p.B * p.Hkv * p.Lk * p.Dv, r);
  let m: Float32Array | null = null, ms = [0, 0, 0];
  if (mask === "full") {
    m = randn(p.B * p.Hq * p.Lq * p.Lk, r, -2, 2);
    ms = [p.Hq * p.Lq * p.Lk, p.Lq * p.Lk, p.Lk];
    for (let i = 0; i < m.length; i++) if (r() < 0.3) m[i] = -Infinity;
    m.fill(-Infinity, 0, p.Lk); // query 0 of head 0, batch 0: every key masked
  } else if (mask === "broadcast") {
    m = randn(p.Lq * p.Lk, r, -1, 1); // [1, 1, Lq, Lk]
    ms = [0, 0, p.Lk];
  }
  return { ...p, q, qs: strides(p.Hq, p.Lq, p.D), k, ks: strides(p.Hkv, p.Lk, p.D),
    v, vs: layout === "bhdl" ? strides(p.Hkv, p.Lk, p.Dv).map((s, i) => (i === 2 ? p.Dv : i === 3 ? 1 : s)) : strides(p.Hkv, p.Lk, p.Dv),
    mask: m, ms };
}

test("sdpa: GQA with causal, sliding-window, softcap and masks against a float64 reference", { skip: gemmTablesSkip }, () => {
  const r = rng(15);
  const base = { B: 2, Hq: 4, Hkv: 2, D: 16, Dv: 8, scale: 0.25, softcap: 0, causalOffset: -1, window: 0 };
  const cases: [string, Partial<Attn>, "bhld" | "blhd" | "bhdl", "none" | "full" | "broadcast"][] = [
    ["full attention", { Lq: 7, Lk: 7 }, "bhld", "none"],
    ["causal prefill", { Lq: 33, Lk: 33, causalOffset: 0 }, "blhd", "none"],
    ["decode step", { Lq: 1, Lk: 33, causalOffset: 32 }, "bhld", "none"],
    ["chunked prefill with cache", { Lq: 5, Lk: 12, causalOffset: 7 }, "bhdl", "none"],
    ["sliding window", { Lq: 20, Lk: 20, causalOffset: 0, window: 4 }, "blhd", "none"],
    ["softcap", { Lq: 9, Lk: 9, causalOffset: 0, softcap: 0.5, scale: 2 }, "bhld", "none"],
    ["additive mask with -inf (all-masked row)", { Lq: 6, Lk: 11 }, "bhld", "full"],
    ["broadcast mask + causal", { Lq: 8, Lk: 8, causalOffset: 0 }, "blhd", "broadcast"],
    ["window past the keys (all-masked rows)", { Lq: 10, Lk: 3, causalOffset: 5, window: 6 }, "bhld", "none"],
    ["MQA decode", { Hq: 8, Hkv: 1, Lq: 1, Lk: 40, causalOffset: 39 }, "bhld", "none"],
    ["larger causal prefill (packed kernels, threads)", { B: 1, Hq: 8, Hkv: 2, Lq: 130, Lk: 130, D: 64, Dv: 64, causalOffset: 0 }, "blhd", "none"],
    ["D = 1", { D: 1, Dv: 1, Lq: 3, Lk: 4 }, "bhld", "none"],
  ];
  for (const [name, over, layout, mask] of cases) {
    const a = makeAttn(r, { ...base, Lq: 1, Lk: 1, ...over } as Attn, layout, mask);
    const out = new Float32Array(a.B * a.Lq * a.Hq * a.Dv).fill(NaN);
    nat.sdpa(a.q, a.qs, a.k, a.ks, a.v, a.vs, out, a.mask, a.ms, a.B, a.Hq, a.Hkv, a.Lq, a.Lk, a.D, a.Dv,
      a.scale, a.softcap, a.causalOffset, a.window, F32, null);
    close(out, sdpaRef(a), 2e-6, 2e-5, `sdpa ${name}`);
    if (mask === "full") assert.deepEqual([...out.subarray(0, a.Dv)], new Array(a.Dv).fill(0), "all-masked row is zero");
  }
});

// ---------------------------------------------------------------------------------------------
// norms / rotary / embedding
// ---------------------------------------------------------------------------------------------

test("rmsNorm: float32 / bfloat16 / float16 weights, offset 0 and 1 (Gemma)", () => {
  const r = rng(16);
  for (const [rows, n] of [[1, 1], [7, 33], [3, 130], [300, 256]])
    for (const dt of ["float32", "bfloat16", "float16"] as WeightDtype[])
      for (const offset of [0, 1]) {
        const x = randn(rows * n, r, -3, 3);
        const [w, wbuf] = weights(randn(n, r), dt);
        const out = new Float32Array(rows * n);
        nat.rmsNorm(x, wbuf, DTYPE_CODE[dt], out, rows, n, 1e-6, offset);
        const exp = new Float64Array(rows * n);
        for (let i = 0; i < rows; i++) {
          let ss = 0;
          for (let j = 0; j < n; j++) ss += x[i * n + j] ** 2;
          const inv = 1 / Math.sqrt(ss / n + 1e-6);
          for (let j = 0; j < n; j++) exp[i * n + j] = x[i * n + j] * inv * (offset + w[j]);
        }
        close(out, exp, 1e-6, 1e-5, `rmsNorm ${rows}x${n} ${dt} offset=${offset}`);
      }
});

test("layerNorm: with and without weight and bias", () => {
  const r = rng(17);
  const [rows, n] = [5, 67];
  const x = randn(rows * n, r, -2, 4);
  const [w, wbuf] = weights(randn(n, r), "float32");
  const [b, bbuf] = weights(randn(n, r), "float16");
  for (const [useW, useB] of [[true, true], [false, false], [false, true]]) {
    const out = new Float32Array(rows * n);
    nat.layerNorm(x, useW ? wbuf : null, F32, useB ? bbuf : null, F16, out, rows, n, 1e-5);
    const exp = new Float64Array(rows * n);
    for (let i = 0; i < rows; i++) {
      const row = Array.from(x.subarray(i * n, (i + 1) * n));
      const mean = row.reduce((s, v) => s + v, 0) / n;
      const v = row.reduce((s, t) => s + (t - mean) ** 2, 0) / n;
      for (let j = 0; j < n; j++) exp[i * n + j] = ((row[j] - mean) / Math.sqrt(v + 1e-5)) * (useW ? w[j] : 1) + (useB ? b[j] : 0);
    }
    close(out, exp, 1e-5, 1e-5, `layerNorm w=${useW} b=${useB}`);
  }
});

/** rotate_half rotary (transformers' apply_rotary_pos_emb) of x [B, L, H, D] by cos, sin [B, L, R], in float64. */
function rotaryReference(x: Float32Array, cos: Float32Array, sin: Float32Array, B: number, L: number, H: number, D: number, R: number): Float64Array {
  const exp = new Float64Array(x.length);
  for (let row = 0; row < B * L * H; row++) {
    const c = Math.floor(row / H) * R, o = row * D, h = R / 2;
    for (let i = 0; i < h; i++) {
      exp[o + i] = x[o + i] * cos[c + i] - x[o + i + h] * sin[c + i];
      exp[o + i + h] = x[o + i + h] * cos[c + i + h] + x[o + i] * sin[c + i + h];
    }
    for (let i = R; i < D; i++) exp[o + i] = x[o + i];
  }
  return exp;
}

test("rotary: rotate_half on partial rotary dims, in place and out of place", () => {
  const r = rng(18);
  const [B, L, H, D, R] = [2, 5, 3, 10, 6];
  const x = randn(B * L * H * D, r), cos = randn(B * L * R, r), sin = randn(B * L * R, r);
  const exp = rotaryReference(x, cos, sin, B, L, H, D, R);
  const out = new Float32Array(x.length);
  nat.rotary(x, cos, sin, out, B, L, H, D, R);
  close(out, exp, 1e-6, 1e-6, "rotary");
  const inPlace = x.slice();
  nat.rotary(inPlace, cos, sin, inPlace, B, L, H, D, R);
  close(inPlace, exp, 1e-6, 1e-6, "rotary in place");
  assert.throws(() => nat.rotary(x, cos, sin, out, B, L, H, D, 5), RangeError);
});

test("rotary: head rows wide enough for the vector loop (half a multiple of 16, with a tail, several blocks), in place equal to out of place", () => {
  const r = rng(118);
  // [D, R]: half = 16 (one block), 20 (a block and a tail of 4), 48 (three blocks, partial rotary), 64.
  for (const [D, R] of [[32, 32], [44, 40], [104, 96], [128, 128]]) {
    const [B, L, H] = [1, 2, 3];
    const x = randn(B * L * H * D, r, -2, 2), cos = randn(B * L * R, r), sin = randn(B * L * R, r);
    const exp = rotaryReference(x, cos, sin, B, L, H, D, R);
    const out = new Float32Array(x.length);
    nat.rotary(x, cos, sin, out, B, L, H, D, R);
    close(out, exp, 2e-6, 1e-6, `rotary D=${D} R=${R}`);
    const inPlace = x.slice();
    nat.rotary(inPlace, cos, sin, inPlace, B, L, H, D, R);
    close(inPlace, exp, 2e-6, 1e-6, `rotary in place D=${D} R=${R}`);
    assert.deepEqual(inPlace, out, `rotary D=${D} R=${R}: in place differs from out of place`);
  }
});

test("embedding: float32 / bfloat16 / float16 tables, int32 / int64 ids, range checks", () => {
  const r = rng(19);
  const [V, dim] = [50, 7];
  const table = randn(V * dim, r);
  for (const dt of ["float32", "bfloat16", "float16"] as WeightDtype[]) {
    const [t, tbuf] = weights(table, dt);
    const ids = [3, 0, 49, 3, 17];
    for (const idsDt of [I32, I64]) {
      const idBuf = idsDt === I32 ? Int32Array.from(ids) : BigInt64Array.from(ids.map(BigInt));
      const out = new Float32Array(ids.length * dim);
      nat.embedding(tbuf, DTYPE_CODE[dt], V, idBuf, idsDt, out, ids.length, dim);
      assert.deepEqual([...out], ids.flatMap((id) => Array.from(t.subarray(id * dim, (id + 1) * dim))));
    }
  }
  const out = new Float32Array(2 * dim);
  assert.throws(() => nat.embedding(table, F32, V, Int32Array.of(1, 50), I32, out, 2, dim),
    (e: Error) => e instanceof RangeError && /id 50 at position 1/.test(e.message));
  assert.throws(() => nat.embedding(table, F32, V, BigInt64Array.of(-1n, 2n), I64, out, 2, dim),
    (e: Error) => e instanceof RangeError && /id -1/.test(e.message));
});

// ---------------------------------------------------------------------------------------------
// sort / topk
// ---------------------------------------------------------------------------------------------

test("sort: stable, ascending and descending, NaN last / first", () => {
  const r = rng(20);
  const [rows, n] = [4, 37];
  const x = Float32Array.from({ length: rows * n }, () => Math.floor(r() * 10) - 5); // many ties
  x[5] = NaN;
  for (const desc of [0, 1]) {
    const vals = new Float32Array(rows * n), idx = new BigInt64Array(rows * n);
    nat.sort(x, vals, idx, rows, n, desc);
    for (let i = 0; i < rows; i++) {
      const key = (v: number) => (Number.isNaN(v) ? Infinity : v);
      const order = Array.from({ length: n }, (_, j) => j).sort((a, b) => {
        const d = key(x[i * n + a]) - key(x[i * n + b]);
        return (desc ? -d : d) || a - b; // stable
      });
      assert.deepEqual([...idx.subarray(i * n, (i + 1) * n)].map(Number), order, `row ${i} desc=${desc}`);
      close(vals.subarray(i * n, (i + 1) * n), order.map((j) => x[i * n + j]), 0, 0, "sorted values");
    }
  }
});

test("topk: largest first, ties by lower index, k = n, k > n throws", () => {
  const x = Float32Array.of(1, 5, 3, 5, -1, 3, 9, 0, /* row 2 */ 2, 2, 2, 1, 0, NaN, 4, 4);
  const vals = new Float32Array(2 * 3), idx = new BigInt64Array(2 * 3);
  nat.topk(x, vals, idx, 2, 8, 3);
  assert.deepEqual([...idx].map(Number), [6, 1, 3, 5, 6, 7]);
  assert.ok(Number.isNaN(vals[3]));
  assert.deepEqual([...vals.subarray(0, 3)], [9, 5, 5]);
  const big = randn(3 * 5000, rng(21)), bv = new Float32Array(3 * 50), bi = new BigInt64Array(3 * 50);
  nat.topk(big, bv, bi, 3, 5000, 50);
  for (let rI = 0; rI < 3; rI++) {
    const order = Array.from({ length: 5000 }, (_, j) => j).sort((a, b) => big[rI * 5000 + b] - big[rI * 5000 + a] || a - b);
    assert.deepEqual([...bi.subarray(rI * 50, (rI + 1) * 50)].map(Number), order.slice(0, 50));
  }
  const all = new Float32Array(8), allI = new BigInt64Array(8);
  nat.topk(x, all, allI, 1, 8, 8);
  assert.deepEqual([...allI].map(Number), [6, 1, 3, 2, 5, 0, 7, 4]);
  assert.throws(() => nat.topk(x, all, allI, 1, 8, 9), RangeError);
});

// ---------------------------------------------------------------------------------------------
// Argument checking
// ---------------------------------------------------------------------------------------------

test("bad arguments throw TypeError / RangeError naming the problem", () => {
  const f = new Float32Array(4);
  const call = (fn: () => void, type: typeof TypeError | typeof RangeError, re: RegExp) =>
    assert.throws(fn, (e: Error) => e instanceof type && re.test(e.message), re.source);
  const anyNat = nat as unknown as Record<string, (...args: unknown[]) => void>;
  call(() => anyNat.unary(0, f, f), TypeError, /unary: expects 4 arguments, got 3/);
  call(() => anyNat.unary(0, [1, 2], f, 2), TypeError, /argument 'x' must be a TypedArray/);
  call(() => nat.unary(99, f, f, 4), RangeError, /argument 'op' = 99 is out of range/);
  call(() => nat.unary(0, f, f, 5), RangeError, /argument 'x' \(float32\) needs 20 bytes/);
  call(() => nat.unary(0, f, f, 1.5), RangeError, /'n' must be an integer/);
  call(() => nat.unary(0, new Uint8Array(f.buffer, 2, 8), f, 1), RangeError, /4-byte aligned/);
  call(() => nat.copy(f, 7, [1], f, F32, [1], [4]), RangeError, /srcDtype/);
  call(() => nat.copy(f, F32, [1, 1], f, F32, [1], [4]), RangeError, /strides of 'src' have 2 entries/);
  call(() => nat.copy(f, F32, [-1], f, F32, [1], [4]), RangeError, /reach before its element 0/);
  call(() => nat.linear(f, f, I32, null, 0, f, 1, 1, 1), TypeError, /wDtype must be float32, float16 or bfloat16/);
  call(() => nat.linear(f, f, F32, null, 0, f, 1, 3, 2), RangeError, /argument 'w' \(float32\) needs 24 bytes/);
  call(() => nat.matmul(f, [1, 1], f, [1, 1, 1], f, 1, 1, 1, 1), RangeError, /'aStrides' must have 3 entries/);
  call(() => nat.sdpa(f, [1, 1, 1, 1], f, [1, 1, 1, 1], f, [1, 1, 1, 1], f, null, [0, 0, 0], 1, 3, 2, 1, 1, 1, 1, 1, 0, -1, 0, F32, null),
    RangeError, /Hq = 3 is not a multiple of Hkv = 2/);
  call(() => nat.sdpa(f, [1, 1, 1, 1], f, [1, 1, 1, 1], f, [1, 1, 1, 1], f, f, [0, 0, 0], 1, 1, 1, 1, 8, 1, 1, 1, 0, -1, 0, F32, null),
    RangeError, /argument 'k'/);
});
