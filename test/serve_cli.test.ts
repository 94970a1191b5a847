/**
 * `tsorch serve` as a process: it prints where it listens, answers, and on SIGTERM lets a running
 * streaming request finish, then exits 0; binding beyond loopback without a key warns.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { test } from "node:test";
import { CLI, missing, ROOT, STORIES } from "./helpers/shared.js";

const skip = missing(STORIES);

/** Start the server; resolves with its base URL once it listens. */
function serve(args: string[], viaNpx = false): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const argv = ["serve", "--model", STORIES, "--port", "0", "--kv-cache-memory", "16MiB", ...args];
  const child = viaNpx
    ? spawn("npm", ["exec", "--offline", "--", "tsorch", ...argv], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] })
    : spawn(process.execPath, [CLI, ...argv], { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  return new Promise((resolve, reject) => {
    child.stderr!.on("data", (d: Buffer) => {
      err += d.toString();
      const m = /on (http:\/\/[^/\s]+)\/v1/.exec(err);
      if (m) resolve({ child, url: m[1], stderr: () => err });
    });
    child.on("exit", (code) => reject(new Error(`tsorch serve exited (${code}) before listening: ${err}`)));
  });
}

const exited = (child: ChildProcess) => new Promise<number | null>((r) => child.on("exit", (code) => r(code)));

test("SIGTERM drains: the running stream completes, then the process exits 0", { skip }, async () => {
  const { child, url, stderr } = await serve(["--served-model-name", "stories"]);
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "stories", prompt: [1], max_tokens: 400, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
  });
  const reader = res.body!.getReader();
  let text = new TextDecoder().decode((await reader.read()).value);
  const code = exited(child);
  child.kill("SIGTERM");
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  assert.ok(text.endsWith("data: [DONE]\n\n"));
  assert.match(text, /"completion_tokens":400/);
  assert.equal(await code, 0, stderr());
  assert.match(stderr(), /SIGTERM: draining/);
});

test("SIGTERM sent to `npx tsorch serve` reaches the server: it drains and npx exits 0", { skip }, async () => {
  const { child, stderr } = await serve([], true);
  const code = exited(child);
  child.kill("SIGTERM");
  assert.equal(await code, 0, stderr());
  assert.match(stderr(), /SIGTERM: draining[^]*stopped/);
});

test("listening beyond loopback without an API key prints a warning", { skip }, async () => {
  const { child, stderr } = await serve(["--host", "0.0.0.0"]);
  const code = exited(child);
  child.kill("SIGTERM");
  assert.equal(await code, 0);
  assert.match(stderr(), /warning: listening on 0\.0\.0\.0 without an API key/);
});
