/**
 * Scenario: the plain `llmgw demo` (what `npm start` runs: three sim-engines,
 * each with one simulated GPU and its own DCGM-style exporter, all on
 * 127.0.0.1) seen in a real headless Chromium. Each engine's GPU is its own
 * card, named by its exporter's host:port, and says which endpoint runs on
 * it — not three identical "GPU 0" rows under one "127.0.0.1" card. A page
 * whose polls never answer still draws them from the snapshot it was served
 * with. Screenshot: test-artifacts/dashboard/demo-static-gpus.png.
 */
import { afterAll, expect } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { dashboardSnapshotSchema } from "../../src/admin/dashboard/snapshot.ts";
import { openChromium } from "../helpers/chromium.ts";
import { demoAdminUrl, spawnDemo } from "../helpers/demo-process.ts";
import { REPO_ROOT, waitUntil } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

const ARTIFACTS = join(REPO_ROOT, "test-artifacts", "dashboard");
let demo: Bun.Subprocess<"ignore", "pipe", "pipe"> | undefined;
let browser: BrowserContext | undefined;

afterAll(async () => {
  await browser?.close();
  if (demo && demo.exitCode === null) process.kill(-demo.pid, "SIGKILL");
});

/** The plain demo on port 0; resolves with its admin URL once the banner is out. */
async function startDemo(): Promise<string> {
  demo = spawnDemo([]);
  return demoAdminUrl(demo);
}

testWithTool(
  "chromium",
  "the plain demo's dashboard: one card per engine's exporter, each GPU naming its endpoint, drawn before the first poll answers",
  async (chromiumPath) => {
    const admin = await startDemo();
    // The three exporters answered: three GPUs, each tied to its endpoint.
    const snap = await waitUntil(
      async () => {
        const s = dashboardSnapshotSchema.parse(await (await fetch(`${admin}/admin/v1/dashboard`)).json());
        return s.gpus.length === 3 ? s : null;
      },
      { what: "three GPUs in the snapshot", timeoutMs: 15_000 },
    );
    const cards = snap.gpus.map((g) => ({ card: new URL(g.exporter!).host, serves: g.serves })).sort((a, b) => a.serves[0]!.localeCompare(b.serves[0]!));
    expect(cards.map((c) => c.serves)).toEqual([["sim-1"], ["sim-2"], ["sim-3"]]);
    expect(new Set(cards.map((c) => c.card)).size).toBe(3);

    mkdirSync(ARTIFACTS, { recursive: true });
    const opened = await openChromium(chromiumPath, { profilePrefix: "dashboard-chromium-", viewport: { width: 1280, height: 800 } });
    browser = opened.browser;
    const { page, problems } = opened;
    await page.goto(`${admin}/dashboard`);
    for (const { card, serves } of cards) {
      const gpu = page.locator(`[data-node="${card}"][data-state="static"] [data-gpu="${card}/0"]`);
      await gpu.waitFor({ timeout: 2_000 });
      expect(await gpu.locator(".gpu-serves").textContent()).toBe(`→ ${serves[0]}`);
      expect(await page.locator(`[data-node="${card}"] .node-note`).first().textContent()).toBe(`static endpoint ${serves[0]}`);
    }
    expect(await page.locator("[data-node]").count()).toBe(3);
    await page.waitForSelector('#status[data-live="true"]');
    await page.screenshot({ path: join(ARTIFACTS, "demo-static-gpus.png"), fullPage: true });

    // Polls held forever: the served snapshot alone draws the cards and the endpoints.
    const held = await browser.newPage();
    held.on("pageerror", (err) => problems.push(`page error (held): ${err.message}`));
    await held.route("**/admin/v1/dashboard", () => {});
    await held.goto(`${admin}/dashboard`);
    await held.waitForSelector("[data-gpu] .gpu-serves[data-serves]", { timeout: 2_000 });
    expect(await held.locator("[data-node]").count()).toBe(3);
    expect(await held.locator("#endpoints tr[data-endpoint]").count()).toBe(3);
    expect(await held.locator("#status").getAttribute("data-live")).toBe("initial");
    await held.close();
    expect(problems).toEqual([]);

    process.kill(demo!.pid, "SIGINT");
    expect(await demo!.exited).toBe(0);
  },
  90_000,
);
