/**
 * The package in a real browser: Debian's Chromium (headless, WebGPU on its SwiftShader adapter)
 * driven by playwright-core. The demo page and a fixture page are bundled with esbuild from the
 * "browser" entries and served from 127.0.0.1; the test checks the greedy story against
 * transformers' ids, a tiny fixture's logits within 1e-3, that a reload gets the weights from the
 * Cache API (the server sees no second request), and saves a screenshot in its temp folder.
 * Without a browser it skips with a message; with CI=true it fails instead.
 */
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { build } from "esbuild";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { bundle, ROOT, startServer, type DemoServer } from "../examples/browser/server.js";
import { maxAbsDiff, missing, readJson, STORIES, TINY } from "./helpers/shared.js";
import { tempDir } from "./helpers/temp_dir.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Flags for WebGPU without a GPU (SwiftShader) and for a machine without outside network. */
const CHROMIUM_ARGS = [
  "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader", "--no-sandbox", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
];
const TINY_LLAMA = path.join(TINY, "llama");
const WEIGHTS = "/models/stories260K/model.safetensors";

const skipFixtures = missing(STORIES) ?? missing(TINY_LLAMA);
const outDir = tempDir("tsorch-browser-");
let browser: Browser | undefined;
/** One browser context for all tests: one Cache API storage, as one user's browser profile. */
let context: BrowserContext | undefined;
let server: DemoServer | undefined;
let noBrowser: string | undefined;

before(async () => {
  if (skipFixtures) return;
  try {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found (apt-get install chromium, or set CHROMIUM_PATH)`);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 30_000 });
    context = await browser.newContext({ viewport: { width: 820, height: 330 } });
  } catch (e) {
    noBrowser = `no browser started: ${(e as Error).message.split("\n")[0]}`;
    if (process.env.CI === "true") throw new Error(`${noBrowser}; CI must run the browser test`);
    return;
  }
  const fixtureHtml = path.join(outDir, "fixture.html");
  writeFileSync(fixtureHtml, '<!doctype html><meta charset="utf-8"><script type="module" src="./fixture.js"></script>');
  server = await startServer({
    port: 0,
    files: { "/": path.join(ROOT, "examples/browser/index.html"), "/fixture.html": fixtureHtml },
    scripts: {
      "/main.js": await bundle(path.join(ROOT, "dist/examples/browser/main.js")),
      "/fixture.js": await bundle(path.join(ROOT, "dist/test/browser/fixture_page.js")),
    },
    folders: { "/models/stories260K/": path.join(ROOT, "models/stories260K"), "/fixtures/tiny-llama/": TINY_LLAMA },
  });
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** Open `url` and wait until the demo sets body[data-done]; returns it ("1" or "error") and #output's text. */
async function runDemo(page: Page, url: string): Promise<{ done: string; text: string; ids: number[] }> {
  await page.goto(url);
  await page.waitForSelector("body[data-done]", { timeout: 45_000 });
  const done = (await page.getAttribute("body", "data-done"))!;
  const text = (await page.textContent("#output"))!;
  const ids = ((await page.getAttribute("#output", "data-new-ids")) ?? "").split(",").filter(Boolean).map(Number);
  return { done, text, ids };
}

test("the demo page streams transformers' greedy story on webgpu; a reload reads model files from the Cache API",
  { skip: skipFixtures, timeout: 90_000 }, async (t) => {
    if (!context || !server) return t.skip(noBrowser);
    const expected = readJson(path.join(STORIES, "expected.json")).generation
      .find((g: { prompt: string }) => g.prompt === "Once upon a time");
    const page = await context.newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));

    const first = await runDemo(page, server.url);
    assert.equal(first.done, "1", `demo failed: ${first.text} ${pageErrors.join("; ")}`);
    assert.deepEqual(first.ids, expected.greedy_new_ids);
    assert.equal(first.text, expected.greedy_text);
    const stats = (await page.textContent("#stats"))!;
    assert.match(stats, /^64 tokens · [\d.]+ tokens\/s/);
    t.diagnostic(`demo: ${stats}`);
    const screenshot = path.join(outDir, "demo.png");
    await page.screenshot({ path: screenshot });
    t.diagnostic(`screenshot: ${screenshot}`);
    assert.equal(server.requests.filter((p) => p === WEIGHTS).length, 1);

    // Reload with ?prompt= (and no new tokens: SwiftShader compiles every shader again per page,
    // which is slow; the cached weights' values are checked by the next test's greedy run).
    const seen: string[] = [];
    page.on("request", (r) => seen.push(new URL(r.url()).pathname));
    const second = await runDemo(page, `${server.url}?prompt=${encodeURIComponent("Lily and Ben")}&max_new_tokens=0`);
    assert.equal(second.done, "1", second.text);
    assert.equal(second.text, "Lily and Ben");
    for (const file of ["model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"]) {
      assert.ok(!seen.includes(`/models/stories260K/${file}`), `the reload requested ${file} again: ${seen.join(", ")}`);
    }
    assert.equal(server.requests.filter((p) => p === WEIGHTS).length, 1, "the server saw a second request for the weights");
    await page.close();
  });

test("in a page: a tiny Llama's logits match transformers within 1e-3, the cached stories260K generates transformers' greedy ids, cpu ops name webgpu",
  { skip: skipFixtures, timeout: 90_000 }, async (t) => {
    if (!context || !server) return t.skip(noBrowser);
    const tiny = readJson(path.join(TINY_LLAMA, "expected.json"));
    const story = readJson(path.join(STORIES, "expected.json")).generation.find((g: { prompt: string }) => g.prompt !== "Once upon a time");
    const page = await context.newPage();
    await page.goto(`${server.url}fixture.html`);
    await page.waitForFunction(() => "fixtureLogits" in globalThis);
    const logits = await page.evaluate(
      ([base, ids]) => (globalThis as any).fixtureLogits(base, ids) as Promise<number[]>,
      ["./fixtures/tiny-llama/", tiny.input_ids] as const,
    );
    const want = (tiny.logits as number[][][]).flat(2);
    assert.equal(logits.length, want.length);
    const diff = maxAbsDiff(logits, want);
    t.diagnostic(`max |logits - transformers| = ${diff.toExponential(2)}`);
    assert.ok(diff <= 1e-3, `max abs diff ${diff}`);

    const ids = await page.evaluate(
      ([base, prompt, n]) => (globalThis as any).greedy(base, prompt, n) as Promise<number[]>,
      ["./models/stories260K/", story.input_ids, story.greedy_new_ids.length] as const,
    );
    assert.deepEqual(ids, story.greedy_new_ids);
    assert.equal(server.requests.filter((p) => p === WEIGHTS).length, 1, "the weights were fetched again instead of read from the Cache API");

    const cpuError = await page.evaluate(() => (globalThis as any).cpuOpError() as Promise<string>);
    assert.match(cpuError, /cpu device has no kernels in a browser.*webgpu/);
    await page.close();
  });

test("the browser entries bundle without Node-only code and export what the Node entries export", async () => {
  for (const [entry, nodeEntry] of [["transformers", "transformers/index"], ["index", "index"], ["hub", undefined]]) {
    const result = await build({
      entryPoints: [path.join(ROOT, `dist/src/browser/${entry}.js`)], bundle: true, format: "esm", platform: "browser",
      minify: true, write: false, metafile: true, logLevel: "silent",
    });
    const inputs = Object.keys(result.metafile.inputs);
    assert.ok(!inputs.some((f) => /node_modules\/webgpu\/|addon_node|local_source|\/dawn\.js/.test(f)), `Node-only module in the ${entry} bundle`);
    const exported = Object.values(result.metafile.outputs)[0].exports;
    // The hub's browser entry has its own API (no file-system functions: resolveModel, readSafetensors…).
    const expected = nodeEntry ? Object.keys(await import(path.join(ROOT, `dist/src/${nodeEntry}.js`))) : ["parseSafetensors", "fetchSource"];
    assert.deepEqual(exported.filter((n) => expected.includes(n)).sort(), [...expected].sort(), `exports of the browser ${entry} entry`);
    if (entry === "transformers") writeFileSync(path.join(outDir, "bundle-size.txt"), `${result.outputFiles[0].contents.byteLength}\n`);
  }
});
