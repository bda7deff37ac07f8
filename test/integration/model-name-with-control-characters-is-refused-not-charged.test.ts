/**
 * Scenario: an engine lists model names a header cannot carry as they are
 * (CJK, Latin-1) and names no one should route to (NUL, the bidi override
 * U+202E), plus a hostile adapter. The printable names are served with 200
 * and x-llmgw-model percent-encoded (built before the engine is asked, so no
 * answer can fail on its header after tokens were spent); the hostile names
 * are left out of discovery, so a request for one is a 404 that never
 * reaches the engine and charges nothing, and the engine's good models stay
 * served. A config naming such a model fails to load, naming the key.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import { auditLine, type Gateway, readSse, startGateway } from "../helpers/cluster.ts";
import { issuesOf } from "../helpers/config-issues.ts";
import { stopAll } from "../helpers/processes.ts";
import { startRogueEngine } from "../helpers/rogue-engine.ts";

const KEY = "names-test-key-00001";
const PRINTABLE = ["ok-model", "模型", "café", "Qwen/Qwen2.5-7B-Instruct:fp8"];
const HOSTILE = ["nul\u0000model", "evil\u202eledom", "zero\u200bwidth", "tab\tmodel"];
/** What the engine was asked for, in order. */
const seen: string[] = [];
let rogue: ReturnType<typeof startRogueEngine>;
let gw: Gateway;

const chunk = (model: string, content: string, finish: string | null) =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", model, choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;

beforeAll(async () => {
  rogue = startRogueEngine([...PRINTABLE, ...HOSTILE, { id: "sql\u0000lora", parent: "ok-model" }], async (req) => {
    const body = (await req.json()) as { model: string; stream?: boolean };
    seen.push(body.model);
    const usage = { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 };
    if (body.stream) {
      const sse =
        chunk(body.model, "hi", null) +
        chunk(body.model, "!", "stop") +
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [], usage })}\n\ndata: [DONE]\n\n`;
      return new Response(sse, { headers: { "content-type": "text/event-stream" } });
    }
    return Response.json({
      id: "c",
      object: "chat.completion",
      model: body.model,
      choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
      usage,
    });
  });
  gw = await startGateway(
    {
      auth: { keys: [{ key: KEY, tenant: "acme" }] },
      tenants: [{ name: "acme", tokens_per_minute: 100_000 }],
      health: { poll_interval_ms: 100 },
      endpoints: [{ id: "rogue", url: `http://127.0.0.1:${rogue.port}` }],
    },
    1,
  );
});

afterAll(async () => {
  await stopAll();
  rogue.stop(true);
});

function chat(model: string, stream = false): Promise<Response> {
  return fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model, stream, ...(stream ? { stream_options: { include_usage: true } } : {}), messages: [{ role: "user", content: "hello" }] }),
  });
}

describe("model names with characters a header cannot carry", () => {
  test("printable names of any script are served, x-llmgw-model percent-encoded, the audit line ok", async () => {
    for (const model of PRINTABLE) {
      for (const stream of [false, true]) {
        const res = await chat(model, stream);
        expect(res.status).toBe(200);
        const header = res.headers.get("x-llmgw-model")!;
        expect(header).toMatch(/^[\x21-\x7e]+$/);
        expect(decodeURIComponent(header)).toBe(model);
        if (stream) expect((await readSse(res)).at(-1)).toBe("[DONE]");
        else expect(((await res.json()) as { model: string }).model).toBe(model);
        const audit = await auditLine(gw, res.headers.get("x-request-id")!);
        expect(audit).toMatchObject({ outcome: "ok", status: 200, model, models: [model] });
      }
    }
    expect(seen.filter((m) => m === "模型")).toHaveLength(2);
  });

  test("a hostile name the engine lists is not discovered: 404 before any engine, nothing charged", async () => {
    const listed = (
      (await (await fetch(`${gw.api}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { data: { id: string }[] }
    ).data.map((m) => m.id);
    expect(listed.sort()).toEqual([...PRINTABLE].sort());
    const asked = seen.length;
    for (const model of [...HOSTILE, "sql\u0000lora"]) {
      const res = await chat(model);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("MODEL_NOT_FOUND");
      expect(res.headers.get("x-llmgw-model")).toBeNull();
      const audit = await auditLine(gw, res.headers.get("x-request-id")!);
      expect(audit.outcome).not.toBe("ok");
      expect(audit.completion_tokens ?? null).toBeNull();
    }
    expect(seen.length).toBe(asked);
    // The engine's other models are still served after it listed the hostile ones.
    expect((await chat("ok-model")).status).toBe(200);
    expect(gw.output()).toContain("engine lists model names the gateway does not accept");
  });
});

describe("a config naming such a model", () => {
  const base = { endpoints: [{ id: "e1", url: "http://127.0.0.1:1" }] };
  test("fails to load, naming the key and the code point, without writing the character itself", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ ...base, models: [{ name: "evil\u202eledom" }] }, "models[0].name"],
      [{ ...base, models: [{ name: "ok", aliases: ["nul\u0000"] }] }, "models[0].aliases[0]"],
      [{ ...base, models: [{ name: "ok", fallback: ["tab\tmodel"] }] }, "models[0].fallback[0]"],
      [{ endpoints: [{ id: "e1", url: "http://127.0.0.1:1", models: ["bell\u0007"] }] }, "endpoints[0].models[0]"],
    ];
    for (const [raw, key] of cases) {
      const issues = issuesOf(() => buildConfig(raw, {}, "llmgw.yaml"));
      expect(issues).toHaveLength(1);
      expect(issues[0]).toStartWith(`${key}: expected a model name`);
      expect(issues[0]).toMatch(/U\+(202E|0000|0009|0007)/);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters the names carried
      expect(issues[0]).not.toMatch(/[\u0000\u0007\t\u202e]/);
    }
    // Any script is a name.
    expect(() => buildConfig({ ...base, models: [{ name: "模型", aliases: ["café"] }] }, {}, "llmgw.yaml")).not.toThrow();
  });
});
