/**
 * The demo's server: bundles page scripts with esbuild (the package's "browser" entry points) and
 * serves them, the page and model folders from 127.0.0.1. Every response is `no-store`, so the
 * browser's HTTP cache never answers for the server: a file a page gets without a request here
 * came from its Cache API. The test (test/browser.test.ts) uses it with extra pages and folders.
 */
import { createReadStream, existsSync, statSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

/** The repository root (this file runs from dist/examples/browser/). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/**
 * Bundle a compiled page script (ES module, browser platform: imports of "tsorch/…" resolve to the
 * "browser" entries of package.json, "#cpu-addon" to its browser module). Returns the minified code.
 */
export async function bundle(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [entry], bundle: true, format: "esm", platform: "browser", target: "es2022",
    minify: true, write: false, logLevel: "silent",
  });
  return result.outputFiles[0].text;
}

export interface ServerOptions {
  /** Port (0 = any free port). */
  port: number;
  /** URL path → file served as it is (e.g. "/": the page's HTML). */
  files: Record<string, string>;
  /** URL path → JavaScript code (bundles). */
  scripts: Record<string, string>;
  /** URL prefix ending in "/" → folder served below it (model folders). */
  folders: Record<string, string>;
}

export interface DemoServer {
  /** http://127.0.0.1:<port>/ */
  readonly url: string;
  /** Path of every request received, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".json": "application/json",
  ".png": "image/png", ".jinja": "text/plain; charset=utf-8",
};

/** Start serving on 127.0.0.1. Unknown paths answer 404 (model sources probe optional files that way). */
export function startServer(opts: ServerOptions): Promise<DemoServer> {
  const requests: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const p = decodeURIComponent(url.pathname);
    requests.push(p);
    const headers = (type: string) => ({ "content-type": type, "cache-control": "no-store" });
    if (opts.scripts[p] !== undefined) {
      res.writeHead(200, headers(TYPES[".js"])).end(opts.scripts[p]);
      return;
    }
    const file = opts.files[p] ?? folderFile(opts.folders, p);
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, headers("text/plain")).end(`not found: ${p}`);
      return;
    }
    res.writeHead(200, { ...headers(TYPES[path.extname(file)] ?? "application/octet-stream"), "content-length": statSync(file).size });
    createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/`,
        requests,
        close: () => new Promise<void>((done) => { server.closeAllConnections(); server.close(() => done()); }),
      });
    });
  });
}

/** The file of `urlPath` inside a mounted folder, or undefined (also for paths escaping the folder). */
function folderFile(folders: Record<string, string>, urlPath: string): string | undefined {
  for (const [prefix, dir] of Object.entries(folders)) {
    if (!urlPath.startsWith(prefix)) continue;
    const file = path.resolve(dir, urlPath.slice(prefix.length));
    if (file.startsWith(path.resolve(dir) + path.sep)) return file;
  }
  return undefined;
}

/** The demo: the page, its bundled script and the embedded stories260K model. */
export async function startDemo(port: number): Promise<DemoServer> {
  return startServer({
    port,
    files: { "/": path.join(ROOT, "examples/browser/index.html") },
    scripts: { "/main.js": await bundle(path.join(ROOT, "dist/examples/browser/main.js")) },
    folders: { "/models/stories260K/": path.join(ROOT, "models/stories260K") },
  });
}
