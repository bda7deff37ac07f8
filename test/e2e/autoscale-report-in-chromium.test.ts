/**
 * Scenario: `bench autoscale`'s HTML page for a short twin run (a load that
 * triples for two minutes, the capacity law against a static fleet), in a
 * real headless Chromium: its five charts drawn with a series per
 * controller, the decisions that changed the count listed, no console
 * error, no request but the page itself. Screenshot:
 * test-artifacts/autoscale/report.png.
 */
import { afterAll, expect } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { BrowserContext } from "playwright-core";
import { autoscaleReport, renderAutoscaleHtml } from "../../src/bench/autoscale/autoscale-report.ts";
import { type AutoscaleWorkload, runControllerTwin } from "../../src/bench/autoscale/autoscale-twin.ts";
import { LLM_D_RAMP } from "../../src/bench/autoscale/llm-d-ramp.ts";
import { openChromium } from "../helpers/chromium.ts";
import { REPO_ROOT } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

const tmp = mkdtempSync(join(tmpdir(), "autoscale-e2e-"));
let browser: BrowserContext | undefined;

afterAll(async () => {
  await browser?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** 2 req/s for 2 minutes, 6 for 2, 2 for 2: ~1,000-token prompts, 200-token answers. */
function workload(): AutoscaleWorkload {
  const requests = [];
  let t = 0;
  for (const rps of [2, 6, 2]) {
    for (let k = 0; k < rps * 120; k++)
      requests.push({ atMs: t + (k * 1000) / rps, segments: [{ key: `q-${requests.length}`, tokens: 1000 }], maxTokens: 200 });
    t += 120_000;
  }
  return {
    name: "m",
    requests,
    profile: "a100-40gb-llama-3.1-8b",
    tensorParallel: 1,
    gpuClass: "A100-40GB",
    slo: LLM_D_RAMP.slo,
    minReplicas: 1,
    maxReplicas: 6,
    scoreFromMs: 0,
  };
}

testWithTool(
  "chromium",
  "the autoscale report in Chromium: five charts with a series per controller, the decisions listed, no console error, no request but the page",
  async (chromiumPath) => {
    const w = workload();
    const runs = [
      await runControllerTwin("capacity", w, { startupS: 30, targetUtilization: 0.85 }),
      await runControllerTwin("static", w, { startupS: 30, targetUtilization: 0.85 }),
    ];
    const report = autoscaleReport({ workload: "test", description: "a short step up and down", w, targetUtilization: 0.85, runs, published: true });
    const path = join(tmp, "report.html");
    writeFileSync(path, renderAutoscaleHtml(report));
    const opened = await openChromium(chromiumPath, { profilePrefix: "autoscale-chromium-", viewport: { width: 1280, height: 900 } });
    browser = opened.browser;
    const { page, problems } = opened;
    const requested: string[] = [];
    page.on("request", (q) => requested.push(q.url()));
    const url = pathToFileURL(path).href;
    await page.goto(url);
    await page.waitForSelector('body[data-charts-ready="5"]', { timeout: 10_000 });
    for (const id of ["replicas-30", "ttft-30", "itl-30", "attainment-30"]) {
      expect({ id, series: await page.locator(`svg[data-chart="${id}"] path.series`).count() }).toEqual({ id, series: 2 });
    }
    expect(await page.locator('svg[data-chart="arrivals-30"] path.series').count()).toBe(1);
    // The capacity law grew the fleet for the step and shrank it after: both directions are listed.
    const decisions = await page.locator("#decisions tr td:nth-child(4)").allTextContents();
    expect(decisions.some((d) => Number(d.split(" → ")[1]) > Number(d.split(" → ")[0]))).toBe(true);
    expect(decisions.some((d) => Number(d.split(" → ")[1]) < Number(d.split(" → ")[0]))).toBe(true);
    await page.locator('svg[data-chart="replicas-30"]').hover();
    expect(await page.locator("#tip").isVisible()).toBe(true);
    mkdirSync(join(REPO_ROOT, "test-artifacts", "autoscale"), { recursive: true });
    await page.screenshot({ path: join(REPO_ROOT, "test-artifacts", "autoscale", "report.png"), fullPage: true });
    expect(problems).toEqual([]);
    expect(requested).toEqual([url]);
  },
  120_000,
);
