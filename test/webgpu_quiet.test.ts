/**
 * Dawn's own warnings (printed from C++ to stderr while it enumerates adapters; on software
 * adapters such as lavapipe, "… artificially reduced …") reach stderr only with TSORCH_DEBUG set.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";
import "../src/devices/builtin.js";
import { CLI } from "./helpers/shared.js";
import { webgpuOrSkip } from "./helpers/webgpu.js";

const run = promisify(execFile);

test("tsorch generate --device webgpu: nothing on stderr unless TSORCH_DEBUG is set", async (t) => {
  if (!(await webgpuOrSkip(t))) return;
  const args = [CLI, "generate", "--device", "webgpu", "--input-ids", "1", "--max-new-tokens", "2", "--output", "json"];
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.TSORCH_DEBUG;
  const quiet = await run(process.execPath, args, { env });
  assert.equal(quiet.stderr, "");
  assert.equal(JSON.parse(quiet.stdout).new_token_ids.length, 2);
  const debug = await run(process.execPath, args, { env: { ...env, TSORCH_DEBUG: "1" } });
  assert.deepEqual(JSON.parse(debug.stdout), JSON.parse(quiet.stdout));
  // Dawn warns on adapters whose limits exceed its caps (lavapipe, in CI); a real GPU may not.
  if (debug.stderr === "") t.diagnostic("this adapter makes Dawn print no warning: only the quiet run was checked");
  else assert.match(debug.stderr, /Warning: /);
});
