/** Each injected fault shows the client exactly the behaviour the gateway's tests rely on. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Started, startLlmgw, stopAll } from "../helpers/processes.ts";

const ITL_MS = 10;
let sim: Started;
beforeAll(async () => {
  sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", String(ITL_MS)]);
});
afterAll(stopAll);

function request(fault: string | undefined, opts: { stream?: boolean; signal?: AbortSignal; maxTokens?: number } = {}): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (fault) headers["x-sim-fault"] = fault;
  return fetch(`${sim.url}/v1/chat/completions`, {
    method: "POST",
    headers,
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: opts.maxTokens ?? 10, stream: opts.stream ?? true }),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
}

/** Read until `ms` pass with no new bytes (or the stream ends / breaks). */
async function readFor(res: Response, ms: number): Promise<{ text: string; ended: "done" | "error" | "idle" }> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = "";
  for (;;) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const idle = new Promise<"idle">((r) => (timer = setTimeout(() => r("idle"), ms)));
    try {
      const r = await Promise.race([reader.read(), idle]);
      if (r === "idle") {
        void reader.cancel().catch(() => {});
        return { text, ended: "idle" };
      }
      if (r.done) return { text, ended: "done" };
      text += dec.decode(r.value, { stream: true });
    } catch {
      return { text, ended: "error" };
    } finally {
      clearTimeout(timer);
    }
  }
}

function dataEvents(text: string): string[] {
  return text.split("\n\n").filter((e) => e.startsWith("data: "));
}

describe("sim-engine faults", () => {
  test("500, 429 (Retry-After: 1) and 503 answer in vLLM's error shape", async () => {
    for (const [fault, type] of [
      ["500", "InternalServerError"],
      ["429", "RateLimitError"],
      ["503", "ServiceUnavailableError"],
    ] as const) {
      const res = await request(fault);
      expect(res.status).toBe(Number(fault));
      const body = (await res.json()) as { error: { message: string; type: string; param: unknown; code: number } };
      expect(Object.keys(body.error)).toEqual(["message", "type", "param", "code"]);
      expect(body.error.type).toBe(type);
      expect(body.error.code).toBe(Number(fault));
      expect(res.headers.get("retry-after")).toBe(fault === "429" ? "1" : null);
    }
  });

  test("no-headers: no response headers ever arrive", async () => {
    const outcome = await request("no-headers", { signal: AbortSignal.timeout(400) }).then(
      () => "headers",
      () => "no headers",
    );
    expect(outcome).toBe("no headers");
  });

  test("no-first-token: 200 and SSE headers, then no data event", async () => {
    const res = await request("no-first-token");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const r = await readFor(res, 300);
    expect(r.ended).toBe("idle");
    expect(dataEvents(r.text)).toEqual([]);
  });

  test("stall:N sends N tokens, then holds the stream open without [DONE]", async () => {
    const r = await readFor(await request("stall:3"), 300);
    expect(r.ended).toBe("idle");
    expect(dataEvents(r.text).length).toBe(1 + 3); // role chunk + 3 tokens
    expect(r.text).not.toContain("[DONE]");
  });

  test("cut:N sends N tokens, then the connection breaks (an error, not a clean end)", async () => {
    const r = await readFor(await request("cut:2"), 2_000);
    expect(r.ended).toBe("error");
    expect(dataEvents(r.text).length).toBe(1 + 2);
    expect(r.text).not.toContain("[DONE]");
    // Non-streaming: the body breaks too.
    const ns = await request("cut:2", { stream: false }).then(
      (res) =>
        res.text().then(
          () => "clean",
          () => "broken body",
        ),
      () => "broken before headers",
    );
    expect(ns).not.toBe("clean");
  });

  test("slow:MS spaces tokens MS apart instead of the ITL", async () => {
    const gapsOf = async (fault: string | undefined) => {
      const res = await request(fault, { maxTokens: 4 });
      const reader = res.body!.getReader();
      const times: number[] = [];
      for (;;) {
        const { done } = await reader.read();
        if (done) break;
        times.push(performance.now());
      }
      return times.slice(1, -1).map((t, i) => t - times[i]!);
    };
    const slow = await gapsOf("slow:120");
    const normal = await gapsOf(undefined);
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    expect(med(slow)).toBeGreaterThan(120 * 0.8);
    expect(med(slow)).toBeGreaterThan(4 * med(normal));
  });

  test("--fault-rate via POST /sim/config applies to requests without the header; a bad header is a 400", async () => {
    const set = (body: unknown) =>
      fetch(`${sim.url}/sim/config`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect((await set({ fault_rate: 1, fault_types: ["429"] })).status).toBe(200);
    expect((await request(undefined)).status).toBe(429);
    expect((await set({ fault_rate: 0 })).status).toBe(200);
    expect((await request(undefined)).status).toBe(200);
    expect((await set({ fault_types: ["bogus"] })).status).toBe(400);
    expect((await set({ itl_ms: "fast" })).status).toBe(400);
    expect((await set({ unknown_field: 1 })).status).toBe(400);
    const bad = await request("explode");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: number } }).error.code).toBe(400);
  });
});
