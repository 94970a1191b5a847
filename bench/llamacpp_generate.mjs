// llama.cpp peer (through the npm package node-llama-cpp): prefill and decode speed of a GGUF on the CPU.
// Adapted from ../shared/tools/bench/llamacpp_generate.mjs (file type q4_0 named); run by bench/main.ts (--llamacpp).
//
// usage: node llamacpp_generate.mjs MODEL.gguf [--threads 2] [--ctx 512] [--new 64] [--runs 3]
//          [--peer-dir /tmp/llamacpp-peer] [--ids 1,2,3] [--kv-type F16|F32] [--flash-attention auto|on|off]
//          [--dump PREFIX --steps 8]
// needs node-llama-cpp installed in --peer-dir (default /tmp/llamacpp-peer, or $LLAMACPP_PEER_DIR):
//   cd /tmp/llamacpp-peer && npm init -y && npm install -E node-llama-cpp@3.21.1
//
// Prompt: the 32 ids torch_generate.py uses (torch.randint(100, 1000, (1, 32), generator=manual_seed(0))).
// Timing (mirrors torch_generate.py): one warm-up generation of 4 tokens, then per run:
//   prefill = evaluate the 32 prompt ids and sample the first new token (logits of the last position only);
//   decode  = the next (new - 1) greedy tokens, one forward each.
// prefill_tok_s = 32 / prefill, decode_tok_s = (new - 1) / decode; medians over --runs runs in one process.
// Prints one JSON line. Generation never stops early (EOG tokens are yielded and fed back).
// Defaults are node-llama-cpp's: F16 KV cache, flash attention "auto" (on for CPU). --kv-type F32 only changes
// anything together with --flash-attention off (llama.cpp casts an F32 cache to F16 for flash attention).
// The machine should be otherwise idle: ggml's spinning threads degrade badly (10-50x) when cores are shared;
// run_llamacpp_peer.py waits for idle CPUs and records how much other processes ran.
//
// --dump PREFIX: instead of timing, generate --steps greedy tokens with full next-token probabilities and write
//   PREFIX.json ({prompt, tokens, vocab}) and PREFIX.f32 (float32 log-probabilities, [steps, vocab], by token id)
//   for compare_llamacpp_torch.py.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const TORCH_IDS_32 = [144, 739, 633, 160, 863, 979, 827, 803, 497, 883, 801, 966, 556, 499, 578, 876,
    856, 568, 294, 733, 126, 219, 891, 354, 324, 141, 269, 369, 349, 280, 281, 712];
const FILE_TYPES = { 0: "float32", 1: "float16", 2: "q4_0", 7: "q8_0", 32: "bfloat16" };

function parseArgs(argv) {
    const a = { threads: 2, ctx: 512, new: 64, runs: 3, peerDir: process.env.LLAMACPP_PEER_DIR || "/tmp/llamacpp-peer",
        ids: TORCH_IDS_32, kvType: null, flashAttention: "auto", dump: null, steps: 8, model: null };
    for (let i = 0; i < argv.length; i++) {
        const k = argv[i], v = () => argv[++i];
        if (k === "--threads") a.threads = Number(v());
        else if (k === "--ctx") a.ctx = Number(v());
        else if (k === "--new") a.new = Number(v());
        else if (k === "--runs") a.runs = Number(v());
        else if (k === "--peer-dir") a.peerDir = v();
        else if (k === "--ids") a.ids = v().split(",").map(Number);
        else if (k === "--kv-type") a.kvType = v();
        else if (k === "--flash-attention") a.flashAttention = v();
        else if (k === "--dump") a.dump = v();
        else if (k === "--steps") a.steps = Number(v());
        else if (k.startsWith("--")) throw new Error(`unknown option ${k}`);
        else a.model = k;
    }
    if (!a.model) throw new Error("usage: node llamacpp_generate.mjs MODEL.gguf [options]");
    return a;
}

const median = (xs) => { const s = [...xs].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const now = () => Number(process.hrtime.bigint()) / 1e9;

async function main() {
    const a = parseArgs(process.argv.slice(2));
    const req = createRequire(path.join(path.resolve(a.peerDir), "package.json"));
    const entry = req.resolve("node-llama-cpp");
    const nlc = await import(pathToFileURL(entry).href);
    const nlcVersion = JSON.parse(readFileSync(path.join(path.dirname(entry), "..", "package.json"), "utf8")).version;

    const llama = await nlc.getLlama({ gpu: false, build: "never", maxThreads: a.threads, logLevel: nlc.LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath: path.resolve(a.model), gpuLayers: 0 });
    const fa = a.flashAttention === "auto" ? "auto" : a.flashAttention === "on";
    const ctxOpts = { contextSize: a.ctx, sequences: 1, threads: { ideal: a.threads, min: a.threads }, flashAttention: fa };
    if (a.kvType) { ctxOpts.experimentalKvCacheKeyType = a.kvType; ctxOpts.experimentalKvCacheValueType = a.kvType; }
    const context = await model.createContext(ctxOpts);
    const seq = context.getSequence();
    const fileType = model.fileInfo.metadata?.general?.file_type;
    const evalOpts = { temperature: 0, yieldEogToken: true };

    // generate `n` tokens after `ids` from an empty sequence; returns [prefill_s, decode_s, tokens]
    async function generate(ids, n) {
        await seq.clearHistory();
        const out = [];
        const t0 = now();
        const it = seq.evaluate(ids, evalOpts);
        let r = await it.next();
        const t1 = now();
        out.push(r.value);
        while (out.length < n) { r = await it.next(); if (r.done) throw new Error("generation ended early"); out.push(r.value); }
        const t2 = now();
        await it.return();
        return [t1 - t0, t2 - t1, out];
    }

    if (a.dump) {
        await seq.clearHistory();
        const vocab = model.tokens.vocabularySize ?? model.fileInfo.metadata.tokenizer.ggml.tokens.length;
        const lp = new Float32Array(a.steps * vocab).fill(-Infinity);
        const tokens = [];
        const it = seq.evaluateWithMetadata(a.ids, { probabilities: true }, evalOpts);
        for (let s = 0; s < a.steps; s++) {
            const r = await it.next();
            tokens.push(r.value.token);
            for (const [tok, p] of r.value.probabilities) lp[s * vocab + tok] = Math.log(p);
        }
        await it.return();
        writeFileSync(a.dump + ".f32", Buffer.from(lp.buffer));
        writeFileSync(a.dump + ".json", JSON.stringify({ model: a.model, prompt: a.ids, tokens, vocab, steps: a.steps,
            kv_type: a.kvType ?? "F16", flash_attention: a.flashAttention }));
        console.log(JSON.stringify({ dumped: a.dump, tokens }));
    } else {
        await generate(a.ids, 4); // warm-up
        const pre = [], dec = [];
        let toks = null;
        for (let r = 0; r < a.runs; r++) {
            const [p, d, t] = await generate(a.ids, a.new);
            pre.push(a.ids.length / p); dec.push((a.new - 1) / d); toks = t;
        }
        console.log(JSON.stringify({
            engine: "llama.cpp", prefill_tok_s: median(pre), decode_tok_s: median(dec), threads: context.currentThreads ?? a.threads,
            dtype: FILE_TYPES[fileType] ?? `file_type_${fileType}`, prompt_len: a.ids.length, new: a.new, runs: a.runs,
            prefill_runs: pre.map((x) => +x.toFixed(2)), decode_runs: dec.map((x) => +x.toFixed(2)),
            first_tokens: toks.slice(0, 8), ctx: context.contextSize, flash_attention: a.flashAttention,
            kv_type: a.kvType ?? "F16", "node-llama-cpp": nlcVersion, llama_cpp: llama.llamaCppRelease,
            cpu_features: llama.systemInfo,
        }));
    }
    await context.dispose(); await model.dispose(); await llama.dispose();
}

main().catch((e) => { console.error(e); process.exit(1); });
