/**
 * Issue 13's building blocks end to end against real sim-engines: a stream
 * cut (or stalled) at token k on one engine, continued on another with
 * continuationBody() from what the StreamTracker saw, its chunks passed
 * through the ContinuationRewriter — the client-visible stream is one
 * stream (one id, one role, one finish_reason, one honest usage) whose text
 * is byte-identical to the uninterrupted answer, for chat and completions,
 * with and without include_usage, also after a second break; and the real
 * `openai` client reads it. The relay's own part (forward events, the usage
 * chunk only when asked for) is played here by `clientSegment`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { ContinuationRewriter } from "../../src/gateway/continuation/chunk-rewriter.ts";
import { continuable, continuationBody } from "../../src/gateway/continuation/continuation-body.ts";
import { type ResumePoint, StreamTracker } from "../../src/gateway/continuation/stream-tracker.ts";
import { type ScannedEvent, SseScanner } from "../../src/gateway/proxy/sse-scanner.ts";
import { type Sim, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

type Route = "chat" | "completions";
const PATH: Record<Route, string> = { chat: "/v1/chat/completions", completions: "/v1/completions" };
const dec = new TextDecoder();

let faulty: Sim;
let healthy: Sim;
beforeAll(async () => {
  const args = ["--model", "m", "--itl-ms", "2", "--output-len", "40"];
  [faulty, healthy] = await Promise.all([startSim(args), startSim(args)]);
});
afterAll(stopAll);

function bodyFor(route: Route, includeUsage: boolean): Record<string, unknown> {
  const usage = includeUsage ? { stream_options: { include_usage: true } } : {};
  return route === "chat"
    ? {
        model: "m",
        messages: [
          { role: "system", content: "Be vivid." },
          { role: "user", content: "Describe the city at night" },
        ],
        stream: true,
        max_tokens: 30,
        seed: 11,
        temperature: 0.8,
        ...usage,
      }
    : { model: "m", prompt: "Once upon a midnight dreary", stream: true, ...usage }; // no max_tokens: ends with "stop" at --output-len
}

/** Stream a request and split it into events; stops at the end, a broken connection, or `idleMs` of silence (a stall, as a gateway's deadline would). */
async function stream(
  sim: Sim,
  route: Route,
  body: string,
  fault?: string,
  idleMs = 300,
): Promise<{ events: ScannedEvent[]; ended: "done" | "broken" | "idle" }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (fault) headers["x-sim-fault"] = fault;
  const res = await fetch(`${sim.api}${PATH[route]}`, { method: "POST", headers, body });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const scanner = new SseScanner();
  const events: ScannedEvent[] = [];
  for (;;) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const idle = new Promise<"idle">((r) => (timer = setTimeout(() => r("idle"), idleMs)));
    try {
      const r = await Promise.race([reader.read(), idle]);
      if (r === "idle") {
        await reader.cancel().catch(() => {});
        return { events, ended: "idle" };
      }
      if (r.done) return { events, ended: "done" };
      events.push(...scanner.push(r.value));
    } catch {
      return { events, ended: "broken" };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** What the relay forwards of one segment: every event, but the usage chunk only when the client asked for usage. */
function clientSegment(events: ScannedEvent[], includeUsage: boolean, rewrite: (e: ScannedEvent) => Uint8Array | undefined): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e.kind === "usage" && !includeUsage) {
      rewrite(e); // the gateway still reads it, for accounting
      continue;
    }
    const bytes = rewrite(e);
    if (bytes) out.push(dec.decode(bytes));
  }
  return out;
}

interface Seen {
  text: string;
  ids: Set<string>;
  roles: number;
  finishes: string[];
  usages: unknown[];
  done: number;
}

function readClientStream(sse: string[], route: Route): Seen {
  const seen: Seen = { text: "", ids: new Set(), roles: 0, finishes: [], usages: [], done: 0 };
  for (const event of sse) {
    if (event.startsWith(":")) continue; // the comment a sim-engine stream opens with, to send its headers at once
    const payload = event.trim().slice("data: ".length);
    if (payload === "[DONE]") {
      seen.done++;
      continue;
    }
    const o = JSON.parse(payload) as {
      id: string;
      created: number;
      model: string;
      choices: { delta?: { role?: string; content?: string }; text?: string; finish_reason: string | null }[];
      usage?: unknown;
    };
    seen.ids.add(`${o.id}|${o.created}|${o.model}`);
    if (o.usage) seen.usages.push(o.usage);
    const c = o.choices[0];
    if (!c) continue;
    if (c.delta?.role) seen.roles++;
    seen.text += route === "chat" ? (c.delta?.content ?? "") : (c.text ?? "");
    if (c.finish_reason !== null) seen.finishes.push(c.finish_reason);
  }
  return seen;
}

/** The client-visible stream of a request whose first segments break with `faults` (one per segment, on the faulty engine), finished on the healthy one. */
async function recovered(route: Route, includeUsage: boolean, faults: string[]): Promise<string[]> {
  const original = bodyFor(route, includeUsage);
  expect(continuable(original, route)).toEqual({ ok: true });
  const tracker = new StreamTracker(route);
  // The gateway always asks the engine for usage; the relay drops the chunk when the client did not ask.
  const upstream = JSON.stringify({ ...original, stream_options: { include_usage: true } });
  const first = await stream(faulty, route, upstream, faults[0]);
  expect(first.ended).not.toBe("done");
  const sse = clientSegment(first.events, includeUsage, (e) => {
    tracker.observe(e);
    return e.bytes;
  });
  let point: ResumePoint = tracker.resumePoint();
  for (let segment = 1; ; segment++) {
    if (!point.ok) throw new Error(`not resumable: ${point.reason}`);
    const body = continuationBody(original, route, point.text, point.tokens);
    expect(body).toBeDefined();
    const fault = faults[segment];
    const next = await stream(fault ? faulty : healthy, route, body!, fault);
    const rewriter = new ContinuationRewriter(route, tracker.identity!, point);
    sse.push(...clientSegment(next.events, includeUsage, (e) => rewriter.rewrite(e)));
    if (next.ended === "done") return sse;
    point = rewriter.resumePoint();
  }
}

async function uninterrupted(route: Route, includeUsage: boolean): Promise<string[]> {
  const { events, ended } = await stream(healthy, route, JSON.stringify(bodyFor(route, includeUsage)));
  expect(ended).toBe("done");
  return events.map((e) => dec.decode(e.bytes));
}

describe("a broken stream continued on another sim-engine", () => {
  for (const route of ["chat", "completions"] as const) {
    for (const includeUsage of [true, false]) {
      for (const fault of ["cut:7", "stall:9"]) {
        test(`${route}, include_usage ${includeUsage}, ${fault}: one stream, byte-identical text`, async () => {
          const want = readClientStream(await uninterrupted(route, includeUsage), route);
          const got = readClientStream(await recovered(route, includeUsage, [fault]), route);
          expect(got.text).toBe(want.text);
          expect(got.ids.size).toBe(1);
          expect([got.roles, got.finishes, got.done]).toEqual([want.roles, want.finishes, 1]);
          expect(got.usages).toEqual(want.usages); // one honest usage chunk, or none when not asked for
        });
      }
    }
  }

  test("a continuation that breaks too is continued again, and the usage still adds up", async () => {
    for (const route of ["chat", "completions"] as const) {
      const want = readClientStream(await uninterrupted(route, true), route);
      const got = readClientStream(await recovered(route, true, ["cut:5", "cut:6"]), route);
      expect(got.text).toBe(want.text);
      expect([got.ids.size, got.roles, got.finishes.length]).toEqual([1, want.roles, 1]);
      expect(got.usages).toEqual(want.usages);
    }
  });

  test("the real openai client reads a recovered stream as one answer", async () => {
    const sse = await recovered("chat", true, ["cut:4"]);
    const replay = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(sse.join(""), { headers: { "content-type": "text/event-stream" } }) });
    try {
      const client = new OpenAI({ baseURL: `http://127.0.0.1:${replay.port}/v1`, apiKey: "x", maxRetries: 0 });
      const chunks = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], stream: true });
      let text = "";
      let usage: unknown;
      const ids = new Set<string>();
      for await (const c of chunks) {
        ids.add(c.id);
        text += c.choices[0]?.delta.content ?? "";
        usage ??= c.usage ?? undefined;
      }
      const want = readClientStream(await uninterrupted("chat", true), "chat");
      expect(text).toBe(want.text);
      expect(ids.size).toBe(1);
      expect(usage).toEqual(want.usages[0]);
    } finally {
      await replay.stop(true);
    }
  });
});
