/**
 * Failover a careful operator signs off, against a provider that serves a
 * primary model and its fallback at one base URL (a hosted API, an engine
 * with several models) and misbehaves as hosted APIs and overloaded engines
 * do. The gateway (a real `llmgw serve`) runs the default settings but for
 * the deadlines of the scenario: headers 30 s, first token 10 s (the inter-
 * token deadline stays at its default, 30 s).
 *
 * - an engine that never answers: exactly one timed-out attempt, then the
 *   fallback, in < 35 s;
 * - a first token that never comes: one attempt, the fallback in < 15 s;
 * - a stream cut after 40 chunks, and one stalled after 20: continued on the
 *   fallback at the same URL; the client reads the delivered prefix then the
 *   fallback's canonical answer from there, with one honest usage;
 * - a primary failing for 40 s, and one failing for 60 s, then recovering,
 *   with a request every 4 s: served by the fallback during the outage and by
 *   the primary again within 10 s of its recovery, whatever the outage's
 *   length (open circuits are probed actively).
 *
 * Sizing: these are wall-clock scenarios (30 s and 10 s deadlines, a 30 s
 * stall, outages of 40 s and 60 s); each has its own rogue provider and its
 * own pair of models on one gateway, and all six run at once from the first
 * test, so the file takes about as long as the longest (the 60 s outage and
 * ~15 s after it: ~80 s) instead of their sum (~4 min). The figures are the
 * issue's own, not shrunk: a shorter outage would not show that recovery is
 * noticed whatever its length.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { auditLine, counterValue, type Gateway, readSse, startGateway } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { type RogueProvider, startRogueProvider } from "../helpers/rogue-provider.ts";

const SCENARIOS = ["never", "silent", "cut", "stall", "out40", "out60"] as const;
type Scenario = (typeof SCENARIOS)[number];
const fallbackOf = (s: Scenario) => `${s}-fallback`;

const providers = {} as Record<Scenario, RogueProvider>;
let gw: Gateway;
/** Each scenario's run, started together in beforeAll. */
const runs = {} as Record<Scenario, Promise<unknown>>;

interface Answer {
  status: number;
  ms: number;
  text: string;
  model: string | null;
  attempts: number;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | undefined;
  /** The `model` every chunk carried. */
  chunkModels: Set<string>;
  errors: string[];
}

const PROMPT = "tell me a long story please";
const PROMPT_TOKENS = 6; // the rogue counts words

async function ask(model: string, id: string, maxTokens = 60): Promise<Answer> {
  const t0 = performance.now();
  const res = await fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": id },
    body: JSON.stringify({
      model,
      stream: true,
      max_tokens: maxTokens,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: PROMPT }],
    }),
  });
  const a: Answer = {
    status: res.status,
    ms: 0,
    text: "",
    model: res.headers.get("x-llmgw-model"),
    attempts: Number(res.headers.get("x-llmgw-attempts") ?? 0),
    usage: undefined,
    chunkModels: new Set(),
    errors: [],
  };
  if (res.status !== 200) {
    a.errors.push(await res.text());
    a.ms = performance.now() - t0;
    return a;
  }
  for (const p of await readSse(res)) {
    if (p === "[DONE]") continue;
    const j = JSON.parse(p) as { model?: string; error?: { code: string }; usage?: Answer["usage"]; choices?: { delta?: { content?: string } }[] };
    if (j.error) a.errors.push(j.error.code);
    if (j.model) a.chunkModels.add(j.model);
    if (j.usage) a.usage = j.usage;
    a.text += j.choices?.[0]?.delta?.content ?? "";
  }
  a.ms = performance.now() - t0;
  return a;
}

/** A primary failing (503) for `outageMs`, then healthy; a request every 4 s until 16 s after the recovery. */
async function outage(s: Scenario, outageMs: number) {
  const p = providers[s];
  p.set(s, "fail");
  const t0 = performance.now();
  const sent: { at: number; a: Answer }[] = [];
  const inflight: Promise<void>[] = [];
  let recoveredAt = Infinity;
  setTimeout(() => {
    p.set(s, "ok");
    recoveredAt = performance.now() - t0;
  }, outageMs);
  for (let i = 0; i * 4_000 < outageMs + 16_000; i++) {
    const wait = i * 4_000 - (performance.now() - t0);
    if (wait > 0) await Bun.sleep(wait);
    const at = performance.now() - t0;
    inflight.push(ask(s, `${s}-${i}`, 5).then((a) => void sent.push({ at, a })));
  }
  await Promise.all(inflight);
  return { sent: sent.sort((x, y) => x.at - y.at), recoveredAt };
}

beforeAll(async () => {
  for (const s of SCENARIOS) providers[s] = startRogueProvider({ [s]: "p", [fallbackOf(s)]: "f" });
  gw = await startGateway(
    {
      deadlines: { headers_ms: 30_000, first_token_ms: 10_000 },
      models: SCENARIOS.flatMap((s) => [{ name: s, fallback: [fallbackOf(s)] }, { name: fallbackOf(s) }]),
      endpoints: SCENARIOS.map((s) => ({ id: s, url: providers[s].url, models: [s, fallbackOf(s)] })),
    },
    SCENARIOS.length,
  );
  providers.never.set("never", "never-answer");
  providers.silent.set("silent", "no-first-token");
  providers.cut.set("cut", { cut: 40 });
  providers.stall.set("stall", { stall: 20 });
  runs.never = ask("never", "never");
  runs.silent = ask("silent", "silent");
  runs.cut = ask("cut", "cut");
  runs.stall = ask("stall", "stall");
  runs.out40 = outage("out40", 40_000);
  runs.out60 = outage("out60", 60_000);
});

afterAll(async () => {
  await stopAll();
  for (const s of SCENARIOS) providers[s]?.server.stop(true);
});

describe("before the first byte: one wasted deadline at most", () => {
  test("an engine that never answers: exactly one timed-out attempt, then the fallback at the same URL, in < 35 s", async () => {
    const a = (await runs.never) as Answer;
    expect([a.status, a.errors, a.attempts, a.model]).toEqual([200, [], 2, "never-fallback"]);
    expect(a.text).toBe(providers.never.canonical("never-fallback", 0, 60));
    expect(a.ms).toBeLessThan(35_000);
    expect(a.ms).toBeGreaterThanOrEqual(29_000);
    expect(providers.never.seen.never).toBe(1);
    // The fallback wrote every chunk, and every chunk names it (as OpenAI names the model that answered).
    expect([...a.chunkModels]).toEqual(["never-fallback"]);
    expect((await auditLine(gw, "never")).models).toEqual(["never-fallback"]);
  });

  test("a first token that never comes: one attempt, the fallback in < 15 s", async () => {
    const a = (await runs.silent) as Answer;
    expect([a.status, a.errors, a.attempts, a.model]).toEqual([200, [], 2, "silent-fallback"]);
    expect(a.text).toBe(providers.silent.canonical("silent-fallback", 0, 60));
    expect(a.ms).toBeLessThan(15_000);
    expect(providers.silent.seen.silent).toBe(1);
  });
});

describe("after the first byte: continued on the fallback at the same URL", () => {
  for (const [s, at, cause] of [
    ["cut", 40, "cut"],
    ["stall", 20, "stall"],
  ] as const) {
    test(`a stream ${s === "cut" ? "cut after 40 chunks" : "stalled after 20"}: the delivered prefix, then the fallback's canonical answer from there; one honest usage`, async () => {
      const a = (await runs[s]) as Answer;
      const p = providers[s];
      expect([a.status, a.errors, a.model]).toEqual([200, [], s]);
      expect(a.text).toBe(p.canonical(s, 0, at) + p.canonical(fallbackOf(s), at, 60));
      expect([...a.chunkModels]).toEqual([s]);
      // The client's prompt (not the continuation's, which carries the prefix too), every token delivered.
      expect(a.usage).toEqual({ prompt_tokens: PROMPT_TOKENS, completion_tokens: 60, total_tokens: PROMPT_TOKENS + 60 });
      const audit = await auditLine(gw, s);
      expect(audit.models).toEqual([s, fallbackOf(s)]);
      expect(audit.recoveries).toEqual([{ cause, from: s, result: "recovered", to: s, model: fallbackOf(s) }]);
      expect(audit.tokens).toEqual({ prompt: PROMPT_TOKENS, completion: 60 });
    });
  }
});

describe("recovery is noticed within seconds, whatever the outage's length", () => {
  for (const [s, outageS] of [
    ["out40", 40],
    ["out60", 60],
  ] as const) {
    test(`a primary failing for ${outageS} s, a request every 4 s: the fallback during the outage, the primary again within 10 s of its recovery`, async () => {
      const { sent, recoveredAt } = (await runs[s]) as Awaited<ReturnType<typeof outage>>;
      const table = sent.map(({ at, a }) => `${(at / 1000).toFixed(1)}s ${a.status} ${a.model} ${a.attempts}`);
      console.log(`${s}: recovered at ${(recoveredAt / 1000).toFixed(1)} s; ${table.join(" | ")}`);
      expect(sent.every(({ a }) => a.status === 200 && a.errors.length === 0)).toBe(true);
      // Sent before the recovery: the fallback answered.
      const during = sent.filter(({ at, a }) => at + a.ms < recoveredAt);
      expect(during.length).toBeGreaterThanOrEqual(outageS / 4 - 1);
      expect(during.every(({ a }) => a.model === fallbackOf(s))).toBe(true);
      // After it: the primary again, within 10 s, and from then on.
      const back = sent.find(({ at, a }) => at >= recoveredAt && a.model === s);
      expect(back).toBeDefined();
      expect(back!.at - recoveredAt).toBeLessThanOrEqual(10_000);
      expect(sent.filter(({ at }) => at >= back!.at).every(({ a }) => a.model === s)).toBe(true);
      // Recovery came from the gateway's own probes, one token each, never from a client's request.
      expect(providers[s].probes[s] ?? 0).toBeGreaterThan(0);
      expect(counterValue(await gw.metrics(), "llmgw_circuit_probes_total", { endpoint: s, result: "ok" })).toBeGreaterThan(0);
    });
  }
});
