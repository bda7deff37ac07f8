/**
 * Scenario: an on-call engineer opens the built-in dashboard of a gateway in
 * front of a sim-engine, in a real headless Chromium. Under non-streamed
 * traffic only, the TTFT cells show a number marked "time to headers" (not
 * "—"); output tokens per second are above 0; the sparklines under the
 * header figures have points. Once streams run, the cells say TTFT again.
 * The page's own origin only (its CSP): no console error. Screenshot:
 * test-artifacts/dashboard/sparklines*.png and header.png.
 */
import { afterAll, expect } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { openChromium } from "../helpers/chromium.ts";
import { startGateway, startSim } from "../helpers/cluster.ts";
import { REPO_ROOT, stopAll, waitUntil } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

const ARTIFACTS = join(REPO_ROOT, "test-artifacts", "dashboard");
let browser: BrowserContext | undefined;
afterAll(async () => {
  await browser?.close();
  await stopAll();
});

/** A seconds figure as the page writes it ("340 ms", "1.25 s"), in seconds; NaN for anything else ("—"). */
function secondsOf(text: string | null): number {
  const m = /^(\d+(?:\.\d+)?) (ms|s)$/.exec(text ?? "");
  return m ? Number(m[1]) / (m[2] === "ms" ? 1000 : 1) : NaN;
}

/** What the header shows now, read through the page's DOM. */
async function kpi(page: Page) {
  const text = async (id: string) => (await page.locator(`#${id}`).textContent()) ?? null;
  const spark = async (id: string) => Number((await page.locator(`#spark-${id}`).getAttribute("data-points")) ?? 0);
  return {
    p50: await text("kpi-ttft-p50"),
    p50Label: await text("kpi-ttft-p50-label"),
    p99Label: await text("kpi-ttft-p99-label"),
    tokens: Number(await text("kpi-tokens")),
    rate: Number(await text("kpi-rate")),
    sparks: { rate: await spark("rate"), tokens: await spark("tokens"), p50: await spark("ttft-p50") },
    path: (await page.locator("#spark-rate path").getAttribute("d")) ?? "",
  };
}

testWithTool(
  "chromium",
  "the dashboard under non-streamed then streamed traffic: time to headers marked, tokens/s above 0, sparklines with points",
  async (chromiumPath) => {
    const sim = await startSim(["--model", "m", "--itl-ms", "3"]);
    const gw = await startGateway({ endpoints: [{ id: "e1", url: sim.api }] }, 1);

    let stream = false;
    let stop = false;
    const statuses: number[] = [];
    const client = async (i: number) => {
      while (!stop) {
        const res = await fetch(`${gw.api}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "m", stream, max_tokens: 16, messages: [{ role: "user", content: `hello ${i}` }] }),
        });
        statuses.push(res.status);
        const body = await res.text();
        // A busy host can make the only endpoint miss health polls (503 no endpoint): logged; the page's figures are what is tested.
        if (res.status !== 200) console.log(`request ${res.status}: ${body.slice(0, 300)}`);
        await Bun.sleep(50);
      }
    };
    const clients = Array.from({ length: 3 }, (_, i) => client(i));

    try {
      mkdirSync(ARTIFACTS, { recursive: true });
      const opened = await openChromium(chromiumPath, { profilePrefix: "dashboard-chromium-", viewport: { width: 1280, height: 800 } });
      browser = opened.browser;
      const { page, problems } = opened;
      await page.goto(`${gw.admin}/dashboard`);
      await page.waitForSelector('#status[data-live="true"]');

      // Non-streamed only: the first-response cells carry the time to headers, marked.
      await page.waitForSelector('#kpi-ttft-p50[data-kind="headers"]', { timeout: 20_000 });
      await waitUntil(async () => (await kpi(page)).sparks.rate >= 5, { what: "5 points in the rate sparkline", timeoutMs: 20_000 });
      const headers = await kpi(page);
      expect(headers.p50Label).toBe("time to headers p50");
      expect(headers.p99Label).toBe("time to headers p99");
      expect(secondsOf(headers.p50)).toBeGreaterThan(0);
      expect(headers.tokens).toBeGreaterThan(0);
      expect(headers.rate).toBeGreaterThan(0);
      expect(headers.sparks.rate).toBeGreaterThanOrEqual(5);
      expect(headers.sparks.tokens).toBeGreaterThanOrEqual(3);
      expect(headers.sparks.p50).toBeGreaterThanOrEqual(3);
      expect(headers.path).toMatch(/^M[\d.]+ [\d.]+(L[\d.]+ [\d.]+)+/);
      expect(await page.locator("#kpi-ttft-p50-label").getAttribute("class")).toContain("headers");
      await page.screenshot({ path: join(ARTIFACTS, "sparklines-time-to-headers.png") });

      // Streams now: a stream finished in the window makes the cells TTFT again.
      stream = true;
      await page.waitForSelector('#kpi-ttft-p50[data-kind="ttft"]', { timeout: 20_000 });
      const ttft = await kpi(page);
      expect(ttft.p50Label).toBe("TTFT p50");
      expect(secondsOf(ttft.p50)).toBeGreaterThan(0);
      expect(ttft.tokens).toBeGreaterThan(0);
      expect(ttft.sparks.rate).toBeGreaterThan(headers.sparks.rate);
      await page.screenshot({ path: join(ARTIFACTS, "sparklines.png") });
      // The header alone (docs/dashboard-header.png is this one).
      await page.locator("header").screenshot({ path: join(ARTIFACTS, "header.png") });
      expect(problems).toEqual([]);
    } finally {
      stop = true;
      await Promise.all(clients);
    }
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(10);
  },
  120_000,
);
