/** The agent poller over an injected fetch: valid states, garbage, timeouts, kept last state, changing targets, DCGM verdicts. */
import { describe, expect, test } from "bun:test";
import { AgentPoller } from "../../src/polling/agent-poller.ts";
import type { FetchFn } from "../../src/polling/probe.ts";
import type { AgentSnapshot, AgentState } from "../../src/protocol/agent-messages.ts";
import { agentGpus } from "../fixtures/fleet/gpus.ts";
import { sharedFixture } from "../helpers/fixtures.ts";

const STATE: AgentState = { node: "host-a", gpus: agentGpus("h200", 1, "p"), fabric: { adapters: [], island: "single-node" }, replicas: [] };

/** A fetch answering per URL; records the requests. */
function fakeFetch(answer: (url: string) => Response | "hang"): { fetch: FetchFn; requests: { url: string; auth: string | null }[] } {
  const requests: { url: string; auth: string | null }[] = [];
  return {
    requests,
    fetch: (url, init) => {
      requests.push({ url, auth: new Headers(init.headers).get("authorization") });
      const a = answer(url);
      if (a !== "hang") return Promise.resolve(a);
      return new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
    },
  };
}

function poller(fetch: FetchFn): { poller: AgentPoller; seen: Map<string, AgentSnapshot> } {
  const seen = new Map<string, AgentSnapshot>();
  return { poller: new AgentPoller({ intervalMs: 1_000, timeoutMs: 100, staleAfterMs: 1_000, fetch }, (node, snap) => seen.set(node, snap)), seen };
}

describe("AgentPoller", () => {
  test("a valid state: ok, with when it was asked and answered; the bearer token is sent", async () => {
    const f = fakeFetch(() => Response.json(STATE));
    const { poller: p, seen } = poller(f.fetch);
    p.setTargets([{ node: "a", url: "http://10.0.0.1:7070", token: "tok", dcgmUrl: undefined }]);
    const before = Date.now();
    await p.pollOnce();
    const snap = seen.get("a")!;
    expect(snap).toMatchObject({ ok: true, state: STATE, consecutiveFailures: 0, lastError: undefined, dcgm: undefined });
    expect(snap.stateRequestedAt!).toBeGreaterThanOrEqual(before);
    expect(snap.answeredAt!).toBeGreaterThanOrEqual(snap.stateRequestedAt!);
    expect(f.requests).toEqual([{ url: "http://10.0.0.1:7070/v1/state", auth: "Bearer tok" }]);
  });

  test("garbage, the wrong shape or no answer count as no answer: the last good state is kept, failures counted", async () => {
    let mode: "ok" | "html" | "shape" | "hang" | "401" = "ok";
    const f = fakeFetch(() => {
      if (mode === "hang") return "hang";
      if (mode === "html") return new Response("<html>oops</html>");
      if (mode === "shape") return Response.json({ ...STATE, replicas: [{ id: 5 }] });
      if (mode === "401") return new Response("no", { status: 401 });
      return Response.json(STATE);
    });
    const { poller: p, seen } = poller(f.fetch);
    p.setTargets([{ node: "a", url: "http://10.0.0.1:7070", token: "tok", dcgmUrl: undefined }]);
    await p.pollOnce();
    const answeredAt = seen.get("a")!.answeredAt;
    const errors: string[] = [];
    for (const m of ["html", "shape", "hang", "401"] as const) {
      mode = m;
      await p.pollOnce();
      errors.push(seen.get("a")!.lastError!);
    }
    expect(errors).toEqual([
      "GET /v1/state: the answer is not JSON",
      "GET /v1/state: not an agent state (replicas.0.id: Invalid input: expected string, received number)",
      "GET /v1/state: timed out after 100 ms",
      "GET /v1/state: HTTP 401",
    ]);
    expect(seen.get("a")).toMatchObject({ ok: false, state: STATE, answeredAt, consecutiveFailures: 4 });
  });

  test("targets change at run time: a removed node is no longer polled, a moved one starts afresh", async () => {
    const f = fakeFetch(() => Response.json(STATE));
    const { poller: p } = poller(f.fetch);
    p.setTargets([
      { node: "a", url: "http://a:1", token: "t", dcgmUrl: undefined },
      { node: "b", url: "http://b:1", token: "t", dcgmUrl: undefined },
    ]);
    await p.pollOnce();
    expect(p.snapshotOf("a")?.ok).toBe(true);
    p.setTargets([{ node: "a", url: "http://a:2", token: "t", dcgmUrl: undefined }]);
    expect(p.snapshotOf("a")).toMatchObject({ ok: false, state: undefined, answeredAt: undefined });
    f.requests.length = 0;
    await p.pollOnce();
    expect(f.requests.map((r) => r.url)).toEqual(["http://a:2/v1/state"]);
  });

  test("a node with a dcgm-exporter: per-GPU fault verdicts ride along; a failed scrape keeps them until stale", async () => {
    const xid = sharedFixture("dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt").replace(/(DCGM_FI_DEV_XID_ERRORS\{[^}]*\}) 0/, "$1 79");
    let dcgmUp = true;
    const f = fakeFetch((url) => (url.includes(":9400") ? (dcgmUp ? new Response(xid) : new Response("down", { status: 503 })) : Response.json(STATE)));
    const { poller: p, seen } = poller(f.fetch);
    p.setTargets([{ node: "a", url: "http://a:7070", token: "t", dcgmUrl: "http://a:9400" }]);
    await p.pollOnce();
    expect(f.requests.map((r) => r.url).sort()).toEqual(["http://a:7070/v1/state", "http://a:9400/metrics"]);
    const first = seen.get("a")!.dcgm!;
    expect(first).toMatchObject({ ok: true, stale: false, lastError: undefined });
    expect(first.gpus[0]).toMatchObject({ uuid: "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e", index: 0, reasons: ["xid 79: GPU has fallen off the bus"] });
    // The exporter's figures ride along for the fleet's GPU series.
    expect(first.gpus[0]!.report).toMatchObject({ uuid: "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e", index: 0, gpuClass: "t4-15g", faultKinds: ["xid"] });
    expect(first.gpus[0]!.report.temperatureC).toBeGreaterThan(0);
    dcgmUp = false;
    await p.pollOnce();
    expect(seen.get("a")!.dcgm).toEqual({ ...first, ok: false, lastError: "GET dcgm /metrics: HTTP 503" });
  });
});
