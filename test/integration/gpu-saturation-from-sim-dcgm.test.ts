/**
 * The sim-engine's simulated GPUs through the real DCGM poller into the
 * saturation tracker: idle is not saturated; a full batch (utilisation 100 %)
 * sustained over the ring makes the pool saturated and the shed decision
 * refuses the batch band only; when the exporter's data goes stale nothing
 * is shed any more.
 */
import { afterAll, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import { PoolSaturationTracker } from "../../src/gpuhealth/gpu-saturation.ts";
import { shedDecision } from "../../src/gpuhealth/shed.ts";
import { DcgmPoller } from "../../src/polling/dcgm-poller.ts";
import { startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

afterAll(stopAll);

test("sustained full utilisation saturates the pool and sheds the batch band only; stale data sheds nothing", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--max-num-seqs", "4", "--itl-ms", "40", "--gpus", "2", "--dcgm-port", "0"], {
    waitFor: 2,
  });
  const config = buildConfig({
    gpu_health: {
      sources: [{ url: `${sim.urls.dcgm}/metrics`, pool: "p" }],
      poll_interval_ms: 100,
      stale_after_ms: 600,
      sustained_samples: 3,
      shed_util_pct: 95,
    },
  });
  const gh = config.gpuHealth!;
  const source = gh.sources[0]!;
  const tracker = new PoolSaturationTracker(gh);
  const poller = new DcgmPoller(
    [{ index: 0, id: "node-0", url: source.url }],
    { intervalMs: gh.pollIntervalMs, timeoutMs: 500, staleAfterMs: gh.staleAfterMs },
    (_i, snap) => tracker.ingest(source, snap.gpus, snap.sampledAt),
  );
  poller.start();
  try {
    await waitUntil(() => tracker.view(Date.now()).length === 2, { what: "both GPUs seen" });
    await Bun.sleep(400);
    expect(tracker.saturated("p", Date.now())).toBe(false);

    // Twice the batch slots, each request ~2.4 s of decode: every slot stays busy.
    const load = Array.from({ length: 8 }, () =>
      fetch(`${sim.urls.api}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", max_tokens: 60, messages: [{ role: "user", content: "busy" }] }),
      }).then((r) => r.text()),
    );
    await waitUntil(() => tracker.saturated("p", Date.now()), { timeoutMs: 5_000, intervalMs: 20, what: "pool saturated" });
    const batchBand = config.admission.bands.findIndex((b) => b.name === "batch");
    const interactive = config.admission.bands.findIndex((b) => b.name === "interactive");
    expect(shedDecision(gh, batchBand, "p", tracker.saturated("p", Date.now()))?.code).toBe("GPU_SATURATED");
    expect(shedDecision(gh, interactive, "p", tracker.saturated("p", Date.now()))).toBeUndefined();
    expect(tracker.view(Date.now()).every((g) => g.latestUtilPct === 100)).toBe(true);

    // The exporter's data stops coming (the poller is gone): within stale_after_ms nothing is shed.
    await poller.stop();
    const stoppedAt = Date.now();
    await waitUntil(() => !tracker.saturated("p", Date.now()), { timeoutMs: 3_000, intervalMs: 20, what: "stale data fails open" });
    expect(Date.now() - stoppedAt).toBeLessThan(gh.staleAfterMs + 300);
    expect(shedDecision(gh, batchBand, "p", tracker.saturated("p", Date.now()))).toBeUndefined();
    await Promise.all(load);
  } finally {
    await poller.stop();
  }
}, 60_000);
