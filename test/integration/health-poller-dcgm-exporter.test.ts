/**
 * The DCGM poller against an in-process fake dcgm-exporter on port 0 serving
 * the real Tesla T4 capture: healthy GPUs first, then a fatal XID appears, then
 * the exporter dies and the last good GPUs are kept with their old time.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { DcgmPoller, type DcgmSnapshot } from "../../src/polling/dcgm-poller.ts";
import { sharedFixture as fixture } from "../helpers/fixtures.ts";

const T4 = fixture("dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt");
const FIRST_T4 = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function startExporter(): { url: string; state: { text: string }; kill(): void } {
  const state = { text: T4 };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) => (new URL(req.url).pathname === "/metrics" ? new Response(state.text) : new Response("", { status: 404 })),
  });
  const kill = (): void => void server.stop(true);
  cleanups.push(kill);
  return { url: `http://127.0.0.1:${server.port}`, state, kill };
}

describe("DCGM poller against a fake exporter", () => {
  test("healthy T4s, then XID 79 faults one, then the exporter dies", async () => {
    const exporter = startExporter();
    const got: DcgmSnapshot[] = [];
    const poller = new DcgmPoller([{ index: 5, id: "node-a", url: exporter.url }], { intervalMs: 1_000, timeoutMs: 500, staleAfterMs: 60_000 }, (index, s) => {
      expect(index).toBe(5);
      got.push(s);
    });
    cleanups.push(() => poller.stop());

    await poller.pollOnce();
    const healthy = poller.snapshot(5)!;
    expect(healthy.ok).toBe(true);
    expect(healthy.gpus.map((g) => g.sample.uuid)).toEqual([FIRST_T4, "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5", "GPU-abc"]);
    expect(healthy.gpus.every((g) => !g.assessment.faulted && !g.assessment.saturated)).toBe(true);
    expect(healthy.unattributed).toBe(7);

    exporter.state.text = T4.replace(/(DCGM_FI_DEV_XID_ERRORS\{[^}]*\}) 0/, "$1 79").replace(/(DCGM_FI_DEV_GPU_UTIL\{[^}]*\}) 0/, "$1 100");
    await poller.pollOnce();
    const faulted = poller.snapshot(5)!.gpus.find((g) => g.sample.uuid === FIRST_T4)!;
    expect(faulted.sample.lastXid).toBe(79);
    expect(faulted.assessment).toEqual({ faulted: true, reasons: ["xid 79: GPU has fallen off the bus"], kinds: ["xid"], saturated: true });
    const goodAt = poller.snapshot(5)!.sampledAt;

    exporter.kill();
    await poller.pollOnce();
    const dead = poller.snapshot(5)!;
    expect(dead.ok).toBe(false);
    expect(dead.consecutiveFailures).toBe(1);
    expect(dead.lastError).toStartWith("GET dcgm /metrics: ");
    expect(dead.sampledAt).toBe(goodAt!);
    expect(dead.stale).toBe(false);
    expect(dead.gpus.find((g) => g.sample.uuid === FIRST_T4)?.assessment.faulted).toBe(true);
    expect(got).toHaveLength(3);
  });

  test("a bare origin is scraped at /metrics", async () => {
    const exporter = startExporter();
    const poller = new DcgmPoller(
      [{ index: 0, id: "n", url: `${exporter.url}/` }],
      { intervalMs: 1_000, timeoutMs: 500, staleAfterMs: 1_000 },
      () => undefined,
    );
    cleanups.push(() => poller.stop());
    await poller.pollOnce();
    expect(poller.snapshot(0)?.ok).toBe(true);
  });
});
