/**
 * The cpu addon on the CPUs this host is not. The functions compiled per ISA level
 * (TSORCH_ISA_CLONES in src/devices/cpu/native/isa_clones.h: rms_norm's and rotary's rows, paged
 * and static attention, elementwise ops, reductions, the bandwidth read) run the copy the CPU
 * supports, whatever TSORCH_CPU_ISA says, so on an AVX-512 host the x86-64-v3 (AVX2) and baseline
 * copies never run in the other test files. Here the files that test those functions run again
 * under QEMU's user-mode emulator (`qemu-x86_64`, Debian's qemu-user): on an emulated Haswell (AVX2,
 * FMA, F16C, no AVX-512: x86-64-v3) and on QEMU's qemu64 model (x86-64 without AVX: the baseline),
 * where the addon picks its clones and kernel tables from the emulated CPU as it would on a real
 * one (QEMU emulates AVX2 whatever this host has). The level this host runs itself is skipped (the
 * other files cover it); without qemu-x86_64 the levels it would cover are reported as not
 * exercised, and under CI=true that fails.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { native } from "../src/devices/cpu/native.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const hostLevel = /\bclones=(\S+)/.exec(native().cpuFeatures())?.[1];

/** An emulated CPU, the clones and kernel tables the addon must pick on it, and the files to run. */
const EMULATED = [
  { cpu: "Haswell", level: "x86-64-v3", kernels: "avx2" },
  { cpu: "qemu64", level: "baseline", kernels: "portable" },
];
// The files that call the per-level functions; of serve_paged_attention only its cpu tests (Dawn is
// not run under emulation); native_cpu leaves out its GEMM tables' tests there (TSORCH_EMULATED_CPU).
const FILES: [string, string | null][] = [
  ["native_cpu.test.js", null],
  ["static_attention.test.js", null],
  ["serve_paged_attention.test.js", "on cpu|reject|rounds"],
];

const qemu = spawnSync("qemu-x86_64", ["--version"], { encoding: "utf8" });
const hasQemu = qemu.status === 0;

/** `node args` under qemu-x86_64 -cpu `cpu`, with TSORCH_CPU_ISA = `kernels` (so that native_cpu's
 * own child runs, which re-run it on narrower kernel tables, stay out), TSORCH_EMULATED_CPU and 2
 * threads. A child process the command starts runs on this host's CPU: qemu-x86_64 emulates one
 * process. */
function underQemu(cpu: string, kernels: string, args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, TSORCH_CPU_ISA: kernels, TSORCH_NUM_THREADS: "2", TSORCH_EMULATED_CPU: cpu };
  // Inherited from our own `node --test` parent, it would make the child always exit 0.
  delete env.NODE_TEST_CONTEXT;
  return spawnSync("qemu-x86_64", ["-cpu", cpu, process.execPath, ...args], { env, encoding: "utf8", timeout: 600_000 });
}

/** stderr without QEMU's notes on CPU features of the model it does not emulate (pcid, rtm, ...). */
const withoutTcgWarnings = (s: string) => s.split("\n").filter((l) => !l.includes("TCG doesn't support requested feature")).join("\n");

for (const e of EMULATED) {
  const skip = process.arch !== "x64" ? "not an x86-64 host"
    : hostLevel === "none" ? "the addon was built without per-level clones (not GCC)"
    : hostLevel === e.level ? `this host runs the ${e.level} clones itself`
    : !hasQemu && process.env.CI !== "true" ? `the ${e.level} clones are not exercised on this host (clones=${hostLevel}): install qemu-user for qemu-x86_64`
    : false;
  test(`the ${e.level} clones and the ${e.kernels} kernels pass the cpu kernel tests on an emulated ${e.cpu}`, { skip }, () => {
    assert.ok(hasQemu, `qemu-x86_64 is missing (CI=true), so the ${e.level} clones would not be exercised: install qemu-user`);
    const probe = underQemu(e.cpu, e.kernels, ["-e", `import(${JSON.stringify(path.join(HERE, "../src/devices/cpu/native.js"))}).then((m) => console.log(m.native().cpuFeatures()))`]);
    assert.equal(probe.status, 0, `the probe failed under qemu-x86_64 -cpu ${e.cpu}:\n${withoutTcgWarnings(probe.stderr)}`);
    assert.match(probe.stdout, new RegExp(`kernels=${e.kernels} .*clones=${e.level}$`, "m"), `qemu-x86_64 -cpu ${e.cpu} did not select the ${e.level} clones: ${probe.stdout}`);
    for (const [file, pattern] of FILES) {
      // The file itself, not `--test file`: the test runner would run it in a child process of its
      // own, which qemu-x86_64 does not follow (it would run on this host's CPU).
      const args = ["--test-reporter=tap", ...(pattern ? ["--test-name-pattern", pattern] : []), path.join(HERE, file)];
      const r = underQemu(e.cpu, e.kernels, args);
      assert.equal(r.status, 0, `${file} failed under qemu-x86_64 -cpu ${e.cpu}:\n${r.stdout.slice(-4000)}\n${withoutTcgWarnings(r.stderr).slice(-2000)}`);
      assert.match(r.stdout, /^# fail 0$/m, `${file} under qemu-x86_64 -cpu ${e.cpu}: ${r.stdout.slice(-500)}`);
      assert.match(r.stdout, /^# pass [1-9]/m, `${file} under qemu-x86_64 -cpu ${e.cpu} ran no test: ${r.stdout.slice(-500)}`);
    }
  });
}
