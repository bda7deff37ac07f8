/**
 * Scenario: `llmgw demo --metrics-listen` on a loopback port, as the shipped
 * deploy/monitoring/prometheus.yml expects (a metrics-only listener): the
 * banner names it, /metrics answers there with the gateway's series, and
 * the admin listener's pages are not served on it.
 */
import { afterAll, expect, test } from "bun:test";
import { demoBanner, spawnDemo } from "../helpers/demo-process.ts";

let demo: ReturnType<typeof spawnDemo> | undefined;

afterAll(() => {
  if (demo && demo.exitCode === null) process.kill(-demo.pid, "SIGKILL");
});

test("the demo started with --metrics-listen answers /metrics there", async () => {
  demo = spawnDemo(["--engines", "1", "--metrics-listen", "127.0.0.1:0"]);
  const banner = await demoBanner(demo);
  const metrics = /Metrics\s+(http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(banner)?.[1];
  expect(metrics).toBeDefined();
  const admin = /Dashboard\s+(\S+)\/dashboard/.exec(banner)![1]!;
  expect(metrics).not.toBe(admin);
  // /metrics answers 503 until the first engine poll completed: a bounded wait, not a fixed sleep.
  let res = await fetch(`${metrics}/metrics`);
  for (let i = 0; i < 150 && res.status !== 200; i++) {
    await Bun.sleep(200);
    res = await fetch(`${metrics}/metrics`);
  }
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  const body = await res.text();
  expect(body).toContain("# TYPE llmgw_requests_total counter");
  expect(body).toMatch(/\nllmgw_endpoint_\w+\{[^}]*endpoint="sim-1"/);
  expect((await fetch(`${metrics}/healthz`)).status).toBe(200);
  // Only /metrics and health: the dashboard and the admin API stay on the admin listener.
  expect((await fetch(`${metrics}/dashboard`)).status).toBe(404);
  expect((await fetch(`${admin}/dashboard`)).status).toBe(200);
}, 120_000);
