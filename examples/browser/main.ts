/**
 * The demo page: loads the embedded stories260K model from this server over fetch (cached by the
 * Cache API), then streams a greedy story on webgpu into #output, with tokens/s in #stats.
 * Query parameters: prompt (default "Once upon a time"), max_new_tokens (default 64).
 * When finished, document.body.dataset.done is "1" (or "error", with the message in #output) and
 * #output's data-new-ids holds the generated token ids.
 */
import { AutoModelForCausalLM, AutoTokenizer } from "tsorch/transformers";

const MODEL = "./models/stories260K/";
const output = document.getElementById("output")!;
const stats = document.getElementById("stats")!;

async function main(): Promise<void> {
  const params = new URLSearchParams(location.search);
  const prompt = params.get("prompt") ?? "Once upon a time";
  const maxNewTokens = Number(params.get("max_new_tokens") ?? 64);
  const started = performance.now();
  const tokenizer = await AutoTokenizer.fromPretrained(MODEL);
  const model = await AutoModelForCausalLM.fromPretrained(MODEL, {
    device: "webgpu",
    onProgress: (p) => { stats.textContent = `loading ${p.file}: ${(p.loaded / 1024).toFixed(0)}${p.total ? ` / ${(p.total / 1024).toFixed(0)}` : ""} KiB`; },
  });
  const loadSeconds = (performance.now() - started) / 1000;
  const promptIds = tokenizer.encode(prompt);
  const newIds: number[] = [];
  output.textContent = prompt;
  const t0 = performance.now();
  let firstAt = 0;
  // max_new_tokens=0 only loads the model (the tests use it to check the Cache API on a reload).
  const steps = maxNewTokens > 0 ? model.generateStream([promptIds], { maxNewTokens, doSample: false }) : [];
  for await (const [id] of steps) {
    newIds.push(id);
    output.textContent = tokenizer.decode([...promptIds, ...newIds], { skipSpecialTokens: true });
    // The first token includes compiling the GPU shaders; the rate is measured over the tokens after it.
    if (newIds.length === 1) firstAt = performance.now();
    const rate = newIds.length > 1 ? ((newIds.length - 1) / ((performance.now() - firstAt) / 1000)).toFixed(1) : "–";
    stats.textContent = `${newIds.length} tokens · ${rate} tokens/s · first token after ${((firstAt - t0) / 1000).toFixed(2)} s · ` +
      `model loaded in ${loadSeconds.toFixed(2)} s`;
  }
  output.dataset.newIds = newIds.join(",");
  document.body.dataset.done = "1";
}

main().catch((e: unknown) => {
  output.textContent = e instanceof Error ? e.message : String(e);
  stats.textContent = "failed";
  document.body.dataset.done = "error";
});
