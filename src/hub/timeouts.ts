/**
 * Timeouts of Hub requests, as huggingface_hub has them (constants.py): metadata requests (model
 * info, file lists, file info) give up after HF_HUB_ETAG_TIMEOUT seconds (default 10) without an
 * answer, downloads after HF_HUB_DOWNLOAD_TIMEOUT seconds (default 30 here; huggingface_hub's 10 s
 * read timeout is tight for large files on slow links) without a byte. Like a socket read timeout,
 * the clock only runs while tsorch waits for the server: before the response headers and during
 * each read of the body, not while the caller is busy with the bytes it has.
 */
import { HubError } from "./errors.js";

/** Timeouts in milliseconds. */
export interface HubTimeouts {
  metadataMs: number;
  downloadMs: number;
}

export const ETAG_TIMEOUT_ENV = "HF_HUB_ETAG_TIMEOUT";
export const DOWNLOAD_TIMEOUT_ENV = "HF_HUB_DOWNLOAD_TIMEOUT";

/**
 * The timeouts from the environment (seconds, decimals allowed). Throws HubError naming the
 * variable when one is set but not a positive number.
 */
export function hubTimeouts(env: NodeJS.ProcessEnv = process.env): HubTimeouts {
  const seconds = (name: string, fallback: number) => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    const s = Number(raw);
    if (!Number.isFinite(s) || s <= 0) throw new HubError(`${name}=${JSON.stringify(raw)} is not a positive number of seconds`);
    return s;
  };
  return { metadataMs: seconds(ETAG_TIMEOUT_ENV, 10) * 1000, downloadMs: seconds(DOWNLOAD_TIMEOUT_ENV, 30) * 1000 };
}

/**
 * `base` with an idle timeout: a request whose server sends no response headers, or no body bytes
 * while the caller waits for them, for `ms` milliseconds is aborted, and the fetch (or the body
 * read) fails with a HubError "no response from <url without query> within N s (<envName>)". The caller's own
 * AbortSignal still works.
 */
export function fetchWithIdleTimeout(base: typeof fetch, ms: number, envName: string): typeof fetch {
  return async (input, init) => {
    const url = (typeof input === "string" ? input : input instanceof URL ? input.href : input.url).split("?")[0];
    const controller = new AbortController();
    const outer = init?.signal;
    if (outer?.aborted) controller.abort(outer.reason);
    outer?.addEventListener("abort", () => controller.abort(outer.reason), { once: true });
    let timer: ReturnType<typeof setTimeout> | undefined;
    let timedOut: HubError | undefined;
    const wait = <T>(what: string, p: Promise<T>): Promise<T> => {
      timer = setTimeout(() => {
        timedOut = new HubError(`no ${what} from ${url} within ${ms / 1000} s (${envName})`);
        controller.abort(timedOut);
      }, ms);
      return p.catch((e) => { throw timedOut ?? e; }).finally(() => clearTimeout(timer));
    };

    const res = await wait("response", base(input, { ...init, signal: controller.signal }));
    if (!res.body) return res;
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        try {
          const { done, value } = await wait("data", reader.read());
          if (done) c.close();
          else c.enqueue(value);
        } catch (e) {
          c.error(e);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    const timed = new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    // Callers look at where redirects ended (@huggingface/hub's fileDownloadInfo reads resp.url).
    Object.defineProperty(timed, "url", { value: res.url });
    Object.defineProperty(timed, "redirected", { value: res.redirected });
    return timed;
  };
}
