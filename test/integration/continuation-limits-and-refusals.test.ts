/**
 * Issue 13's bounds and refusals, through real gateways and sim-engines: a
 * second break within one request is continued again (down the fallback
 * chain once the model's replicas are spent) up to continuation.max_recoveries,
 * then the client gets the explicit error of the break; a continuation
 * target that rejects the prefill yields the original error, never its 400,
 * and is never a target again (it still serves ordinary requests).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ssePayloads, type Transcript, transcriptOf } from "../../src/bench/answer-transcript.ts";
import { auditLine, counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

let cutA: Sim; // serves m: every stream cut after 5 tokens
let cutB: Sim; // the same
let backup: Sim; // serves the fallback m-backup, healthy
let solo: Sim; // serves solo: every stream cut after 5 tokens
let strict: Sim; // serves the fallback solo-strict, and refuses chat prefills
let twice: Gateway; // max_recoveries 2
let once: Gateway; // max_recoveries 1

const SIM = ["--itl-ms", "2", "--output-len", "40"];

function gatewayConfig(maxRecoveries: number): Record<string, unknown> {
  return {
    deadlines: { idle_ms: 1000, total_ms: 30_000 },
    circuit_breaker: { failure_threshold: 1000 },
    health: { poll_interval_ms: 100 },
    continuation: { max_recoveries: maxRecoveries },
    models: [{ name: "m", fallback: ["m-backup"] }, { name: "m-backup" }, { name: "solo", fallback: ["solo-strict"] }, { name: "solo-strict" }],
    endpoints: [
      { id: "cut-a", url: cutA.api, models: ["m"] },
      { id: "cut-b", url: cutB.api, models: ["m"] },
      { id: "backup", url: backup.api, models: ["m-backup"] },
      { id: "solo", url: solo.api, models: ["solo"] },
      { id: "strict", url: strict.api, models: ["solo-strict"] },
    ],
  };
}

beforeAll(async () => {
  const cut = ["--fault-rate", "1", "--fault-types", "cut:5"];
  [cutA, cutB, backup, solo, strict] = await Promise.all([
    startSim(["--model", "m", ...SIM, ...cut]),
    startSim(["--model", "m", ...SIM, ...cut]),
    startSim(["--model", "m-backup", ...SIM]),
    startSim(["--model", "solo", ...SIM, ...cut]),
    startSim(["--model", "solo-strict", ...SIM, "--reject-continuation"]),
  ]);
  [twice, once] = await Promise.all([startGateway(gatewayConfig(2), 5), startGateway(gatewayConfig(1), 5)]);
});

afterAll(stopAll);

function body(model: string, n: number): Record<string, unknown> {
  return {
    model,
    messages: [{ role: "user", content: `Tell me about river ${n}` }],
    stream: true,
    max_tokens: 24,
    seed: 3,
    stream_options: { include_usage: true },
  };
}

/** The uninterrupted answer (the sim's text depends on the prompt and seed, not on the model's name). */
async function reference(b: Record<string, unknown>): Promise<Transcript> {
  const res = await fetch(`${backup.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...b, model: "m-backup" }),
  });
  return transcriptOf(ssePayloads(await res.text()), "chat");
}

interface Audit {
  outcome: string;
  recoveries?: Record<string, string>[];
}

let requests = 0;

/** A streamed chat request through `gw`: what the client read, and the request's audit line. */
async function chat(gw: Gateway, b: Record<string, unknown>): Promise<Transcript & { audit: () => Promise<Audit> }> {
  const id = `limits-${requests++}`;
  const res = await fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": id },
    body: JSON.stringify(b),
  });
  expect(res.status).toBe(200);
  const t = transcriptOf(ssePayloads(await res.text()), "chat");
  return Object.assign(t, { audit: async () => (await auditLine(gw, id)) as unknown as Audit });
}

describe("bounded continuation", () => {
  test("a second break is continued again, down the fallback chain: one whole answer after two recoveries", async () => {
    const b = body("m", 1);
    const got = await chat(twice, b);
    const want = await reference(b);
    expect(got.errors).toEqual([]);
    expect(got.text).toBe(want.text);
    expect([got.ids.size, got.roles, got.finishes, got.done]).toEqual([1, 1, want.finishes, 1]);
    expect(got.usages).toEqual(want.usages);
    expect([...got.ids][0]).toContain("|m"); // the original model's name on every chunk, also those the fallback wrote
    const audit = await got.audit();
    expect(audit.outcome).toBe("ok");
    expect(audit.recoveries!.map((r) => [r.cause, r.result, r.model ?? "m"])).toEqual([
      ["cut", "recovered", "m"],
      ["cut", "recovered", "m-backup"],
    ]);
    expect(audit.recoveries![1]!.to).toBe("backup");
  });

  test("past max_recoveries the client gets the break's explicit error after the text delivered so far", async () => {
    const b = body("m", 2);
    const got = await chat(once, b);
    const want = await reference(b);
    expect(got.errors).toEqual(["UPSTREAM_STREAM_TRUNCATED"]);
    expect(got.done).toBe(1);
    expect(got.finishes).toEqual([]);
    // Two segments of five tokens each went out, then the error. What the client reads is the answer's
    // start, whole: the first five tokens at least, at most all ten. Fewer than ten when the second
    // engine's last tokens and its reset reach the gateway together: Bun's fetch errors the body
    // stream, and chunks it had queued but the gateway had not yet read go with it (under load, 3
    // of 5 once) — tokens no one delivered, so nothing is duplicated or skipped.
    const words = want.text.split(/(?= )/);
    const delivered = got.text.split(/(?= )/).length;
    expect(delivered).toBeGreaterThanOrEqual(5);
    expect(delivered).toBeLessThanOrEqual(10);
    expect(got.text).toBe(words.slice(0, delivered).join(""));
    const audit = await got.audit();
    expect(audit.outcome).toBe("stream_error");
    expect(audit.recoveries!.map((r) => r.result)).toEqual(["recovered", "limit"]);
    expect(counterValue(await once.metrics(), "llmgw_stream_recoveries_total", { result: "limit", cause: "cut" })).toBe(1);
  });
});

describe("a target that cannot continue", () => {
  test("rejects the prefill: the client gets the original break's error, not the 400, and the target is learned", async () => {
    const got = await chat(twice, body("solo", 3));
    expect(got.errors).toEqual(["UPSTREAM_STREAM_TRUNCATED"]);
    expect(got.done).toBe(1);
    expect((await got.audit()).recoveries).toEqual([{ cause: "cut", from: "solo", result: "no_target" }]);
    expect(twice.output()).toContain("endpoint refused a continuation");
    const refusals = () => twice.metrics().then((t) => counterValue(t, "llmgw_upstream_failures_total", { endpoint: "strict", reason: "status_4xx" }));
    expect(await refusals()).toBe(1);

    // Never a target again: the next break goes straight to the explicit error.
    const again = await chat(twice, body("solo", 4));
    expect(again.errors).toEqual(["UPSTREAM_STREAM_TRUNCATED"]);
    expect(await refusals()).toBe(1);

    // It still serves its own model's ordinary requests.
    const plain = await chat(twice, body("solo-strict", 5));
    expect([plain.errors, plain.finishes, plain.done]).toEqual([[], ["length"], 1]);
  });
});
