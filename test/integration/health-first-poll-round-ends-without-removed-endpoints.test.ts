/**
 * Scenario: the health worker's first poll round (the metrics listener
 * answers 503 until it ends). An endpoint present at start that is removed
 * before it ever answered (here: one that never answers) must not hold the
 * round open for ever; with no endpoint at start (a fleet-only gateway) the
 * round ends at once; replicas added later are not waited for.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "bun";
import { HealthService } from "../../src/polling/health-service.ts";
import type { FromHealth, PolledEndpoint } from "../../src/protocol/health-messages.ts";
import { EndpointTable } from "../../src/shared/endpoint-table.ts";
import { waitUntil } from "../helpers/processes.ts";

const HEALTH = { pollIntervalMs: 100, timeoutMs: 5_000, staleAfterMs: 2_000, timeoutsBeforeUnready: 3 };
let engine: Server<unknown>;
let silent: Server<unknown>;

function endpoint(index: number, url: string): PolledEndpoint {
  return { index, id: `e${index}`, url, engine: "auto", models: undefined, staticModels: false, gpuIds: [], dcgmUrl: undefined, pool: "default", poolRow: 0 };
}

function service(endpoints: PolledEndpoint[]): { svc: HealthService; got: FromHealth[] } {
  const got: FromHealth[] = [];
  const svc = new HealthService(new EndpointTable(4), endpoints, HEALTH, (m) => void got.push(m));
  return { svc, got };
}

const polledRound = (got: FromHealth[]) => got.some((m) => m.type === "engines-polled");

beforeAll(() => {
  engine = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) => (new URL(req.url).pathname === "/v1/models" ? Response.json({ data: [{ id: "m" }] }) : new Response("")),
  });
  // Accepts and never answers: its first poll cannot end before the poll deadline.
  silent = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Promise<Response>(() => {}) });
});

afterAll(async () => {
  await Promise.all([engine.stop(true), silent.stop(true)]);
});

describe("the first poll round", () => {
  test("an endpoint removed before its first answer no longer holds it open", async () => {
    const { svc, got } = service([endpoint(0, `http://127.0.0.1:${engine.port}`), endpoint(1, `http://127.0.0.1:${silent.port}`)]);
    svc.start();
    await waitUntil(() => got.some((m) => m.type === "readiness" && m.index === 0), { what: "endpoint 0 polled" });
    expect(polledRound(got)).toBe(false); // endpoint 1 is still being waited for
    svc.remove(1);
    expect(polledRound(got)).toBe(true);
    expect(got.filter((m) => m.type === "engines-polled")).toHaveLength(1);
    await svc.stop();
  });

  test("no endpoint at start: the round is over at once, and replicas added later are not waited for", async () => {
    const { svc, got } = service([]);
    svc.start();
    expect(polledRound(got)).toBe(true);
    svc.add(endpoint(0, `http://127.0.0.1:${silent.port}`));
    svc.add(endpoint(1, `http://127.0.0.1:${engine.port}`));
    await waitUntil(() => got.some((m) => m.type === "readiness" && m.index === 1), { what: "endpoint 1 polled" });
    expect(got.filter((m) => m.type === "engines-polled")).toHaveLength(1);
    await svc.stop();
  });
});
