/**
 * Page script of test/browser.test.ts, bundled like the demo: exposes what the test evaluates in
 * the page — a fixture model's full logits on webgpu, and the error a cpu op gives in a browser.
 */
import { tensor } from "tsorch";
import { AutoModelForCausalLM } from "tsorch/transformers";

const page = globalThis as unknown as {
  fixtureLogits(base: string, ids: number[][]): Promise<number[]>;
  greedy(base: string, ids: number[], maxNewTokens: number): Promise<number[]>;
  cpuOpError(): Promise<string>;
};

/** float32 logits [B, L, vocab] of the model at URL `base`, flattened. */
page.fixtureLogits = async (base, ids) => {
  const model = await AutoModelForCausalLM.fromPretrained(base, { device: "webgpu" });
  return Array.from(await model.logits(ids).data(), Number);
};

/** The new token ids of a greedy continuation of `ids` by the model at URL `base`. */
page.greedy = async (base, ids, maxNewTokens) => {
  const model = await AutoModelForCausalLM.fromPretrained(base, { device: "webgpu" });
  return (await model.generate(ids, { maxNewTokens, doSample: false })).slice(ids.length);
};

/** The message of running an op on the cpu device in a page ("" if it did not throw). */
page.cpuOpError = async () => {
  try {
    await tensor([1, 2, 3]).add(1).data();
    return "";
  } catch (e) {
    return (e as Error).message;
  }
};
