/**
 * A stand-in for the Hugging Face Hub on 127.0.0.1, serving model repos from local folders (top-level
 * files only) through the endpoints @huggingface/hub calls to look up and download files:
 *   GET /api/models/{org}/{name}/revision/{rev}   model info with "sha" (modelInfo)
 *   GET /api/models/{org}/{name}/tree/{rev}       file list with oid/size/lfs (listFiles)
 *   GET /{org}/{name}/resolve/{rev}/{file}        file bytes; Range → 206 + Content-Range; headers
 *                                                 ETag, X-Repo-Commit, and X-Linked-Etag/-Size for LFS
 * {rev} is "main" or the repo's commit; a repo given as { branches } (kernel repositories) serves each
 * branch from its own folder, files in subfolders included, at its own commit. *.safetensors files are LFS files (etag = sha256), others
 * regular git files (etag = git blob sha1), as on the real Hub. Unknown repos, revisions and files
 * get the Hub's 404 (JSON {"error"} and X-Error-Code). Every request is recorded in `requests`.
 * `faults` makes file downloads (not the 1-byte "bytes=0-0" probes) misbehave, to test timeouts
 * and resuming. writeSafetensors builds checkpoints for such repos.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

interface MockFile {
  path: string;
  content: Buffer;
  /** Git object id: of the file, or of its LFS pointer. */
  oid: string;
  /** sha256 of the content, for LFS files. */
  lfsOid?: string;
  pointerSize?: number;
}

interface MockRepo {
  commit: string;
  files: Map<string, MockFile>;
}

export interface MockHub {
  /** Base URL, e.g. "http://127.0.0.1:40123": pass it as the endpoint. */
  url: string;
  /** Every request received, in order. */
  requests: { method: string; url: string; authorization?: string; range?: string }[];
  /** The commit hash the repo `id` is served at (on `branch`, default main). */
  commit(id: string, branch?: string): string;
  /** Stop the server (again: no-op); its port then refuses connections. */
  close(): Promise<void>;
}

const gitOid = (data: Buffer) => createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex");

/** Files of `folder` (relative "/" paths): top-level only, or every subfolder too. */
function filesOf(folder: string, recursive: boolean, prefix = ""): string[] {
  return readdirSync(join(folder, prefix)).sort().flatMap((name) => {
    const rel = prefix ? `${prefix}/${name}` : name;
    if (statSync(join(folder, rel)).isFile()) return [rel];
    return recursive ? filesOf(folder, true, rel) : [];
  });
}

function loadRepo(folder: string, recursive = false): MockRepo {
  const files = new Map<string, MockFile>();
  for (const name of filesOf(folder, recursive)) {
    const content = readFileSync(join(folder, name));
    if (name.endsWith(".safetensors")) {
      const lfsOid = createHash("sha256").update(content).digest("hex");
      const pointer = Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${lfsOid}\nsize ${content.length}\n`);
      files.set(name, { path: name, content, oid: gitOid(pointer), lfsOid, pointerSize: pointer.length });
    } else {
      files.set(name, { path: name, content, oid: gitOid(content) });
    }
  }
  const commit = createHash("sha1").update([...files.values()].map((f) => `${f.path} ${f.oid}`).join("\n")).digest("hex");
  return { commit, files };
}

/** Ways downloads of a file can go wrong. */
export interface MockFaults {
  /** The next `times` downloads of `file` send `after` bytes of the body, then close the connection. */
  cut?: { file: string; after: number; times: number };
  /** Downloads of these files send the response headers, then nothing, ever. */
  stall?: string[];
}

/** Start a mock Hub serving `repos`: Hub id ("org/name") → local folder, or { branches: name → folder }. */
export async function startMockHub(repos: Record<string, string | { branches: Record<string, string> }>, faults: MockFaults = {}): Promise<MockHub> {
  const branches = new Map<string, Map<string, MockRepo>>();
  for (const [id, spec] of Object.entries(repos)) {
    const b = typeof spec === "string" ? { main: loadRepo(spec) } : Object.fromEntries(Object.entries(spec.branches).map(([n, f]) => [n, loadRepo(f, true)]));
    branches.set(id, new Map(Object.entries(b)));
  }
  const served = new Map([...branches].map(([id, b]) => [id, b.get("main") ?? [...b.values()][0]]));
  const requests: MockHub["requests"] = [];

  const notFound = (res: ServerResponse, code: string, error: string) => {
    res.writeHead(404, { "Content-Type": "application/json", "X-Error-Code": code });
    res.end(JSON.stringify({ error }));
  };
  const json = (res: ServerResponse, body: unknown) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    requests.push({ method: req.method ?? "", url: req.url ?? "", authorization: req.headers.authorization, range: req.headers.range });
    const parts = new URL(req.url ?? "/", "http://x").pathname.split("/").slice(1).map(decodeURIComponent);
    const api = parts[0] === "api" && parts[1] === "models";
    const [org, name, kind, rev, ...rest] = api ? parts.slice(2) : parts;
    const id = `${org}/${name}`;
    const revs = branches.get(id);
    if (!revs) return notFound(res, "RepoNotFound", "Repository not found");
    const repo = revs.get(rev) ?? [...revs.values()].find((r) => r.commit === rev);
    if (!repo) return notFound(res, "RevisionNotFound", `Invalid rev id: ${rev}`);

    if (api && kind === "revision" && req.method === "GET") {
      return json(res, {
        _id: repo.commit.slice(0, 24), id, sha: repo.commit, private: false, gated: false, disabled: false,
        downloads: 0, likes: 0, lastModified: "2024-01-01T00:00:00.000Z", pipeline_tag: "text-generation",
        siblings: [...repo.files.keys()].map((rfilename) => ({ rfilename })),
      });
    }
    if (api && kind === "tree" && req.method === "GET") {
      return json(res, [...repo.files.values()].map((f) => ({
        type: "file", oid: f.oid, size: f.content.length, path: f.path,
        ...(f.lfsOid && { lfs: { oid: f.lfsOid, size: f.content.length, pointerSize: f.pointerSize } }),
      })));
    }
    if (!api && kind === "resolve" && req.method === "GET") {
      const file = repo.files.get(rest.join("/"));
      if (!file) return notFound(res, "EntryNotFound", "Entry not found");
      const size = file.content.length;
      const headers: Record<string, string | number> = {
        "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes",
        ETag: `"${file.lfsOid ?? file.oid}"`, "X-Repo-Commit": repo.commit,
        ...(file.lfsOid && { "X-Linked-Etag": `"${file.lfsOid}"`, "X-Linked-Size": size }),
      };
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
      const start = range ? Number(range[1]) : 0;
      const end = range ? Math.min(range[2] ? Number(range[2]) : size - 1, size - 1) : size - 1;
      const body = file.content.subarray(start, end + 1);
      if (range) res.writeHead(206, { ...headers, "Content-Range": `bytes ${start}-${end}/${size}`, "Content-Length": body.length });
      else res.writeHead(200, { ...headers, "Content-Length": size });
      if (req.headers.range !== "bytes=0-0") {
        if (faults.stall?.includes(file.path)) return res.flushHeaders();
        if (faults.cut?.file === file.path && faults.cut.times > 0) {
          faults.cut.times--;
          // Close once the client had time to take the bytes: bytes still queued in its stream
          // when the connection ends are dropped with the error.
          res.write(body.subarray(0, faults.cut.after), () => setTimeout(() => res.socket?.end(), 100));
          return;
        }
      }
      return res.end(body);
    }
    notFound(res, "NotFound", `no mock route for ${req.method} ${req.url}`);
  };

  const server = createServer(handle);
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    commit: (id, branch) => (branch ? branches.get(id)!.get(branch)! : served.get(id)!).commit,
    close: () => new Promise<void>((ok, fail) => {
      if (!server.listening) return ok();
      server.closeAllConnections();
      server.close((e) => (e ? fail(e) : ok()));
    }),
  };
}

/** Write a safetensors file: header padded with spaces to a multiple of 8, as the Python writer does. */
export function writeSafetensors(file: string, tensors: { name: string; dtype: string; shape: number[]; bytes: Uint8Array }[],
  metadata?: Record<string, string>): void {
  const header: Record<string, unknown> = metadata ? { __metadata__: metadata } : {};
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.length] };
    offset += t.bytes.length;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((8 + json.length) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([len, Buffer.from(json), ...tensors.map((t) => t.bytes)]));
}
