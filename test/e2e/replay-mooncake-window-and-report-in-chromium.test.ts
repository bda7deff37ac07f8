/**
 * Scenario: `llmgw bench replay` on the first 10 s of the shipped Mooncake
 * conversation trace at ×10, two sim-engines behind a gateway, engine flags
 * passed through. Every request is accounted for; percentiles are ordered;
 * the engines' own counters see exactly the trace's prompt and output
 * tokens (prompts built to length, ignore_eos honoured) and prefix-cache hits
 * no larger than the block sharing the trace records. Then the --report page
 * in a real headless Chromium: its five charts drawn, no console error, no
 * request but the page itself. Screenshot: test-artifacts/replay/report.png.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { BrowserContext } from "playwright-core";
import { parseMooncakeJsonl } from "../../src/bench/replay/mooncake-trace.ts";
import type { ReplayReport } from "../../src/bench/replay/replay-report.ts";
import { MOONCAKE_BLOCK_TOKENS } from "../../src/bench/replay/trace.ts";
import { TRACES_DIR } from "../../src/bench/replay/trace-files.ts";
import { runBenchJson } from "../helpers/bench-json.ts";
import { openChromium } from "../helpers/chromium.ts";
import { REPO_ROOT } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

const WINDOW_MS = 10_000;
const tmp = mkdtempSync(join(tmpdir(), "replay-e2e-"));
const reportPath = join(tmp, "report.html");
let r: ReplayReport;
let browser: BrowserContext | undefined;

beforeAll(async () => {
  r = await runBenchJson<ReplayReport>([
    "replay",
    "--trace",
    "mooncake-conversation",
    "--duration",
    String(WINDOW_MS / 1000),
    "--speedup",
    "10",
    "--engines",
    "2",
    "--engine-args=--itl-ms 5 --max-num-seqs 64",
    "--report",
    reportPath,
  ]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  rmSync(tmp, { recursive: true, force: true });
});

test("every request of the window accounted for, percentiles ordered, the engines saw the trace's tokens", () => {
  const trace = parseMooncakeJsonl(readFileSync(join(TRACES_DIR, "mooncake-conversation.jsonl"), "utf8"));
  const window = trace.requests.filter((q) => q.atMs < WINDOW_MS);
  expect(r.num_prompts).toBe(window.length);
  expect([r.target, r.completed, r.failed, r.short_answers]).toEqual(["llmgw", window.length, 0, 0]);
  expect(r.endpoints.reduce((n, e) => n + e.requests, 0)).toBe(window.length);
  expect(r.endpoints.map((e) => e.id)).toEqual(["sim-1", "sim-2"]);

  for (const m of ["ttft", "tpot", "itl", "e2el"] as const) {
    expect(r[`median_${m}_ms`]).toBeGreaterThan(0);
    expect(r[`median_${m}_ms`]).toBeLessThanOrEqual(r[`p90_${m}_ms`]!);
    expect(r[`p90_${m}_ms`]!).toBeLessThanOrEqual(r[`p99_${m}_ms`]!);
  }
  expect(r.median_ttft_ms).toBeLessThan(r.median_e2el_ms);
  expect(r.goodput_requests).toBeLessThanOrEqual(r.completed);
  // The engine flags reached the engines (after the bench's own): 5 ms steps, not the default 20.
  expect(r.engine_args!.slice(-4)).toEqual(["--itl-ms", "5", "--max-num-seqs", "64"]);
  expect(r.median_itl_ms).toBeLessThan(15);

  // The engines' own counters: the trace's prompt tokens exactly (prompts built to length) and its output tokens (ignore_eos).
  const sum = (f: (e: ReplayReport["endpoints"][number]) => number | undefined) => r.endpoints.reduce((n, e) => n + (f(e) ?? NaN), 0);
  expect(sum((e) => e.engine?.requests)).toBe(window.length);
  expect(sum((e) => e.engine?.prompt_tokens)).toBe(window.reduce((n, q) => n + q.inputTokens, 0));
  expect(sum((e) => e.engine?.generation_tokens)).toBe(window.reduce((n, q) => n + q.outputTokens, 0));
  // Prefix-cache hits happen (the trace shares blocks) and never exceed the tokens of blocks whose
  // whole id chain another request of the window also has: a fresh id never hits.
  const chains = new Map<string, number>();
  for (const q of window)
    q.blockIds!.forEach((_, j) => chains.set(q.blockIds!.slice(0, j + 1).join(","), (chains.get(q.blockIds!.slice(0, j + 1).join(",")) ?? 0) + 1));
  let bound = 0;
  for (const q of window) {
    q.blockIds!.forEach((_, j) => {
      if (chains.get(q.blockIds!.slice(0, j + 1).join(","))! > 1) bound += Math.min(MOONCAKE_BLOCK_TOKENS, q.inputTokens - j * MOONCAKE_BLOCK_TOKENS);
    });
  }
  const hits = sum((e) => e.engine?.prefix_cache_hit_tokens);
  expect(hits).toBeGreaterThan(0);
  expect(hits).toBeLessThanOrEqual(bound);

  // The timeline covers the run and counts every arrival.
  const t = r.timeline;
  expect(Math.round(t.arrivals_per_s.reduce((n, a) => n + a * t.bucket_s, 0))).toBe(window.length);
  expect(Object.keys(t.endpoint_in_flight)).toEqual(["sim-1", "sim-2"]);
});

testWithTool(
  "chromium",
  "the HTML report in Chromium: five charts drawn, no console error, no request but the page",
  async (chromiumPath) => {
    const html = readFileSync(reportPath, "utf8");
    expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)=/i);
    const opened = await openChromium(chromiumPath, { profilePrefix: "replay-chromium-", viewport: { width: 1280, height: 900 } });
    browser = opened.browser;
    const { page, problems } = opened;
    const requested: string[] = [];
    page.on("request", (q) => requested.push(q.url()));
    const url = pathToFileURL(reportPath).href;
    await page.goto(url);
    // The inline script ran to its end over every chart.
    await page.waitForSelector('body[data-charts-ready="5"]', { timeout: 10_000 });
    for (const id of ["arrivals", "ttft", "tpot", "in-flight", "endpoints"]) {
      const paths = page.locator(`svg[data-chart="${id}"] path.series`);
      expect({ id, drawn: (await paths.count()) > 0 }).toEqual({ id, drawn: true });
      // Its points are drawn: joined by lines, or dots where no neighbouring bucket has a value.
      const vertices = ((await paths.first().getAttribute("d")) ?? "").match(/[ML][\d.]+,[\d.]+/g)?.length ?? 0;
      expect({ id, points: vertices >= 2 }).toEqual({ id, points: true });
      const svgBox = await page.locator(`svg[data-chart="${id}"]`).boundingBox();
      expect({ id, shown: (svgBox?.width ?? 0) > 300 && (svgBox?.height ?? 0) > 100 }).toEqual({ id, shown: true });
    }
    expect(await page.locator('svg[data-chart="endpoints"] path.series').count()).toBe(2);
    expect(await page.locator("#latency tr").count()).toBe(5);
    // The hover read-out works.
    await page.locator('svg[data-chart="ttft"]').hover();
    expect(await page.locator("#tip").isVisible()).toBe(true);
    mkdirSync(join(REPO_ROOT, "test-artifacts", "replay"), { recursive: true });
    await page.screenshot({ path: join(REPO_ROOT, "test-artifacts", "replay", "report.png"), fullPage: true });
    expect(problems).toEqual([]);
    expect(requested).toEqual([url]);
  },
  60_000,
);
