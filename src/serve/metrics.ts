/**
 * Prometheus metrics (prom-client), named after vLLM's (`vllm:` becomes `tsorch:`): requests
 * running and waiting, KV-cache usage, prefix-cache queries and hits (tokens), time to first token,
 * time per output token and end-to-end latency histograms, prompt and generation token counters,
 * preemptions, finished requests by reason, and per-iteration batch sizes. Every series carries
 * the served model name. The process metrics of prom-client (memory, CPU) are included.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EngineObserver } from "./engine.js";
import type { Sequence } from "./sequence.js";

/** Engine state read at scrape time. */
export interface EngineState {
  running: number;
  waiting: number;
  kvUsage: number;
  preemptions: number;
}

const LATENCY = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];

export class ServeMetrics implements EngineObserver {
  readonly registry = new Registry();
  private readonly labels: { model_name: string };
  private readonly prefixQueries: Counter;
  private readonly prefixHits: Counter;
  private readonly ttft: Histogram;
  private readonly tpot: Histogram;
  private readonly e2e: Histogram;
  private readonly promptTokens: Counter;
  private readonly generationTokens: Counter;
  private readonly success: Counter;
  private readonly iterationRunning: Histogram;
  private readonly iterationTokens: Histogram;

  /** `state` is read at every scrape. */
  constructor(modelName: string, state: () => EngineState) {
    this.labels = { model_name: modelName };
    const labelNames = ["model_name"];
    const registers = [this.registry];
    const gauge = (name: string, help: string, key: keyof EngineState) => new Gauge({
      name, help, labelNames, registers, collect() { this.set({ model_name: modelName }, state()[key]); },
    });
    const counter = (name: string, help: string, extra: string[] = []) => new Counter({ name, help, labelNames: [...labelNames, ...extra], registers });
    const histogram = (name: string, help: string, buckets: number[]) => new Histogram({ name, help, labelNames, buckets, registers });
    gauge("tsorch:num_requests_running", "Sequences in the running batch.", "running");
    gauge("tsorch:num_requests_waiting", "Sequences waiting to be scheduled.", "waiting");
    gauge("tsorch:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (0-1).", "kvUsage");
    gauge("tsorch:num_preemptions_total", "Sequences preempted (recomputed later) since start.", "preemptions");
    this.prefixQueries = counter("tsorch:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache (whole blocks).");
    this.prefixHits = counter("tsorch:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.");
    this.ttft = histogram("tsorch:time_to_first_token_seconds", "Time from arrival to the first token.", LATENCY);
    this.tpot = histogram("tsorch:time_per_output_token_seconds", "Time between consecutive output tokens.", LATENCY);
    this.e2e = histogram("tsorch:e2e_request_latency_seconds", "Time from arrival to the last token.", LATENCY);
    this.promptTokens = counter("tsorch:prompt_tokens_total", "Prompt tokens of finished sequences.");
    this.generationTokens = counter("tsorch:generation_tokens_total", "Generated tokens.");
    this.success = counter("tsorch:request_success_total", "Finished sequences by finish reason.", ["finished_reason"]);
    this.iterationRunning = histogram("tsorch:iteration_num_running", "Sequences running per engine step.", [1, 2, 4, 8, 16, 32, 64, 128, 256]);
    this.iterationTokens = histogram("tsorch:iteration_tokens_total", "Tokens computed per engine step.", [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]);
    collectDefaultMetrics({ register: this.registry });
  }

  step(i: { running: number; waiting: number; kvUsage: number; tokens: number }): void {
    this.iterationRunning.observe(this.labels, i.running);
    this.iterationTokens.observe(this.labels, i.tokens);
  }

  firstToken(seq: Sequence): void {
    this.ttft.observe(this.labels, (seq.firstTokenAt - seq.arrival) / 1000);
    this.generationTokens.inc(this.labels);
  }

  token(_seq: Sequence, interval: number): void {
    this.tpot.observe(this.labels, interval / 1000);
    this.generationTokens.inc(this.labels);
  }

  prefix(queries: number, hits: number): void {
    this.prefixQueries.inc(this.labels, queries);
    this.prefixHits.inc(this.labels, hits);
  }

  finished(seq: Sequence): void {
    this.success.inc({ ...this.labels, finished_reason: seq.finishReason ?? "abort" });
    this.promptTokens.inc(this.labels, seq.prompt.length);
    if (seq.output.length) this.e2e.observe(this.labels, (performance.now() - seq.arrival) / 1000);
  }
}
