/**
 * Scenario: a 10,000-line embeddings batch (~8 KB of input a line) runs
 * through the gateway while three interactive clients stream chat
 * completions (`llmgw bench batch --case embeddings`, which measures the
 * targets: no stall added, TTFT p99 within 1.25× of idle). Here, on a shared
 * and busy machine, the relative properties with margins: the gateway's
 * event loop stalls over 50 ms no more often per second than with no batch
 * (plus a few the machine may cause), interactive TTFT p99 stays within 2×
 * of idle, and the batch completes with every line once.
 */
import { expect, test } from "bun:test";
import { runEmbeddingsBatchBench } from "../../src/bench/batch-embeddings-scenario.ts";

const LINES = 10_000;

test("10k-line embeddings batch under interactive load: no stalls added, interactive TTFT held, every line once", async () => {
  const r = await runEmbeddingsBatchBench({ engines: 2, lines: LINES, lineBytes: 8_192, concurrency: 32, phaseMs: 8_000, maxBatchMs: 150_000, log: (l) => console.log(l) });
  console.log(JSON.stringify(r));
  expect(r.batch.status).toBe("completed");
  expect({ completed: r.batch.completed, failed: r.batch.failed }).toEqual({ completed: LINES, failed: 0 });
  expect(r.idle.errors + r.batch.errors).toBe(0);
  const idlePerS = r.idle.stalls / r.idle.seconds;
  expect(r.batch.stalls).toBeLessThanOrEqual(Math.ceil(idlePerS * r.batch.seconds) + 3);
  expect(r.ratio).toBeLessThan(2);
}, 240_000);
