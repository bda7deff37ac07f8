/**
 * Issue 13's must-show, through a real gateway: with the sim-engine's
 * cut-mid and stall-mid faults on one of two replicas, every stream
 * completes, and what the client reads is one answer whose text is
 * byte-identical to the same request answered without faults (one id, one
 * role delta, one finish_reason, the same usage) — chat and raw
 * completions, with and without include_usage; the real `openai` client
 * reads recovered streams without noticing; the audit line and the metrics
 * record each recovery and its cause; a request that cannot be continued
 * exactly (logprobs) still ends with its explicit error event.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { ssePayloads, type Transcript, transcriptOf } from "../../src/bench/answer-transcript.ts";
import { auditLine, counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { runTool, testWithTool } from "../helpers/system-tools.ts";

type Route = "chat" | "completions";
const PATH: Record<Route, string> = { chat: "/v1/chat/completions", completions: "/v1/completions" };

let faulty: Sim;
let healthy: Sim;
let gw: Gateway;

beforeAll(async () => {
  const args = ["--model", "m", "--itl-ms", "2", "--output-len", "40"];
  [faulty, healthy] = await Promise.all([startSim(args), startSim(args)]);
  gw = await startGateway(
    {
      deadlines: { idle_ms: 400, total_ms: 30_000 },
      // Every break counts against the faulty replica; keep it in rotation so that streams keep landing there.
      circuit_breaker: { failure_threshold: 1000 },
      health: { poll_interval_ms: 100 },
      endpoints: [
        { id: "faulty", url: faulty.api, models: ["m"] },
        { id: "healthy", url: healthy.api, models: ["m"] },
      ],
    },
    2,
  );
});

afterAll(stopAll);

let seq = 0;

function bodyFor(route: Route, includeUsage: boolean, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const n = seq++; // a new prompt each time: prefix affinity must not pin them all to one replica
  const usage = includeUsage ? { stream_options: { include_usage: true } } : {};
  return route === "chat"
    ? {
        model: "m",
        messages: [
          { role: "system", content: "Be vivid." },
          { role: "user", content: `Describe city ${n} at night` },
        ],
        stream: true,
        max_tokens: 30,
        seed: 11,
        temperature: 0.8,
        ...usage,
        ...extra,
      }
    : { model: "m", prompt: `Once upon a midnight dreary, number ${n}`, stream: true, ...usage, ...extra }; // no max_tokens: "stop" at --output-len
}

/** The same request answered by the healthy engine directly, with no gateway and no fault. */
async function reference(route: Route, body: Record<string, unknown>): Promise<Transcript> {
  const res = await fetch(`${healthy.api}${PATH[route]}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return transcriptOf(ssePayloads(await res.text()), route);
}

async function viaGateway(route: Route, body: Record<string, unknown>): Promise<{ endpoint: string | null; t: Transcript }> {
  const res = await fetch(`${gw.api}${PATH[route]}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return { endpoint: res.headers.get("x-llmgw-endpoint"), t: transcriptOf(ssePayloads(await res.text()), route) };
}

/** Streams in parallel until at least `onFaulty` of them started on the faulty replica; each is checked against its reference. */
async function streamsWith(route: Route, includeUsage: boolean, onFaulty: number): Promise<number> {
  let faultyCount = 0;
  for (let round = 0; round < 6 && faultyCount < onFaulty; round++) {
    const bodies = Array.from({ length: 6 }, () => bodyFor(route, includeUsage));
    const results = await Promise.all(bodies.map((b) => viaGateway(route, b)));
    for (let i = 0; i < bodies.length; i++) {
      const { endpoint, t } = results[i]!;
      const want = await reference(route, bodies[i]!);
      expect(t.errors).toEqual([]);
      expect(t.text).toBe(want.text);
      expect(t.ids.size).toBe(1);
      expect([t.roles, t.finishes, t.done]).toEqual([want.roles, want.finishes, 1]);
      expect(t.usages).toEqual(want.usages); // one honest usage chunk, or none when not asked for
      if (endpoint === "faulty") faultyCount++;
    }
  }
  expect(faultyCount).toBeGreaterThanOrEqual(onFaulty);
  return faultyCount;
}

describe("streams broken mid-answer on one of two replicas", () => {
  for (const [fault, cause] of [
    ["cut:7", "cut"],
    ["stall:9", "stall"],
  ] as const) {
    for (const route of ["chat", "completions"] as const) {
      for (const includeUsage of [true, false]) {
        test(`${fault}, ${route}, include_usage ${includeUsage}: every stream completes, byte-identical, as one stream`, async () => {
          await faulty.configure({ fault_rate: 1, fault_types: [fault] });
          const before = counterValue(await gw.metrics(), "llmgw_stream_recoveries_total", { cause, result: "recovered" });
          const broke = await streamsWith(route, includeUsage, 2);
          const after = counterValue(await gw.metrics(), "llmgw_stream_recoveries_total", { cause, result: "recovered" });
          expect(after - before).toBe(broke);
        });
      }
    }
  }

  test("the audit line records each recovery: its cause, where it broke and where it went on", async () => {
    await faulty.configure({ fault_rate: 1, fault_types: ["cut:3"] });
    for (let i = 0; i < 24; i++) {
      const id = `audit-${i}`;
      const res = await fetch(`${gw.api}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-request-id": id },
        body: JSON.stringify(bodyFor("chat", false)),
      });
      await res.text();
      if (res.headers.get("x-llmgw-endpoint") !== "faulty") continue;
      const audit = await auditLine(gw, id);
      expect([audit.outcome, audit.attempts]).toEqual(["ok", 2]);
      expect(audit.recoveries).toEqual([{ cause: "cut", from: "faulty", result: "recovered", to: "healthy" }]);
      return;
    }
    throw new Error("no request started on the faulty replica");
  });

  test("the real openai client reads recovered streams, chat and completions, as single answers", async () => {
    await faulty.configure({ fault_rate: 1, fault_types: ["cut:4"] });
    const client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: "x", maxRetries: 0 });
    let recovered = 0;
    for (let i = 0; i < 12 && recovered < 2; i++) {
      const chatBody = bodyFor("chat", true);
      const { data, response } = await client.chat.completions.create(chatBody as unknown as OpenAI.ChatCompletionCreateParamsStreaming).withResponse();
      let text = "";
      let usage: unknown;
      const ids = new Set<string>();
      for await (const c of data) {
        ids.add(c.id);
        text += c.choices[0]?.delta.content ?? "";
        usage ??= c.usage ?? undefined;
      }
      const want = await reference("chat", chatBody);
      expect([text, ids.size, usage]).toEqual([want.text, 1, want.usages[0]]);

      const rawBody = bodyFor("completions", false);
      const raw = await client.completions.create(rawBody as unknown as OpenAI.CompletionCreateParamsStreaming).withResponse();
      let rawText = "";
      for await (const c of raw.data) rawText += c.choices[0]?.text ?? "";
      expect(rawText).toBe((await reference("completions", rawBody)).text);
      if (response.headers.get("x-llmgw-endpoint") === "faulty") recovered++;
      if (raw.response.headers.get("x-llmgw-endpoint") === "faulty") recovered++;
    }
    expect(recovered).toBeGreaterThanOrEqual(2);
  });

  test("a request that cannot be continued exactly (logprobs) still ends with its explicit error event", async () => {
    await faulty.configure({ fault_rate: 1, fault_types: ["cut:3"] });
    const before = counterValue(await gw.metrics(), "llmgw_stream_recoveries_total", { result: "not_continuable" });
    let onFaulty: Transcript | undefined;
    for (let i = 0; i < 24 && !onFaulty; i++) {
      const r = await viaGateway("chat", bodyFor("chat", false, { logprobs: true }));
      if (r.endpoint === "faulty") onFaulty = r.t;
    }
    expect(onFaulty!.errors).toEqual(["UPSTREAM_STREAM_TRUNCATED"]);
    expect(onFaulty!.done).toBe(1);
    expect(counterValue(await gw.metrics(), "llmgw_stream_recoveries_total", { result: "not_continuable" })).toBe(before + 1);
  });
});

testWithTool("promtool", "the scrape with recoveries counted and timed passes promtool check metrics", async (bin) => {
  const text = await gw.metrics();
  expect(text).toContain('llmgw_stream_recoveries_total{model="m",cause="stall",result="recovered"}');
  expect(text).toContain("llmgw_stream_recovery_seconds_bucket");
  const r = await runTool(bin, ["check", "metrics"], text);
  expect(r.out.trim()).toBe("");
  expect(r.code).toBe(0);
});
