/**
 * Scenario: `llmgw demo --fleet` seen in a real headless Chromium. A
 * simulated GPU a replica runs on shows the memory the replica holds (as a
 * real GPU under vLLM would: most of its 80 GiB), a free one 0 — not "0.0
 * of 80 GiB" everywhere. And a GPU whose used memory nobody reported reads
 * "not reported" (a drawn-as-absent bar), never 0.
 */
import { afterAll, expect } from "bun:test";
import type { BrowserContext } from "playwright-core";
import { dashboardSnapshotSchema } from "../../src/admin/dashboard/snapshot.ts";
import { openChromium } from "../helpers/chromium.ts";
import { demoAdminUrl, spawnDemo } from "../helpers/demo-process.ts";
import { waitUntil } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

let demo: Bun.Subprocess<"ignore", "pipe", "pipe"> | undefined;
let browser: BrowserContext | undefined;

afterAll(async () => {
  await browser?.close();
  if (demo && demo.exitCode === null) process.kill(-demo.pid, "SIGKILL");
});

async function startFleetDemo(): Promise<string> {
  demo = spawnDemo(["--fleet"]);
  return demoAdminUrl(demo);
}

testWithTool(
  "chromium",
  "the fleet demo's dashboard: a GPU running a replica shows the memory it holds, a free one 0, an unreported one 'not reported'",
  async (chromiumPath) => {
    const admin = await startFleetDemo();
    // Two replicas, one per node, each on one GPU; the agents' next poll reports what they hold.
    const snap = await waitUntil(
      async () => {
        const s = dashboardSnapshotSchema.parse(await (await fetch(`${admin}/admin/v1/dashboard`)).json());
        const busy = s.gpus.filter((g) => g.serves.length > 0);
        return busy.length === 2 && busy.every((g) => (g.memory_used_bytes ?? 0) > 0) ? s : null;
      },
      { what: "two GPUs serving with their memory reported", timeoutMs: 15_000 },
    );
    expect(snap.gpus).toHaveLength(8);
    for (const g of snap.gpus) {
      if (g.serves.length > 0) expect(g.memory_used_bytes! / g.memory_total_bytes!).toBeGreaterThan(0.5);
      else expect(g.memory_used_bytes).toBe(0);
    }

    const opened = await openChromium(chromiumPath, { profilePrefix: "dashboard-chromium-", viewport: { width: 1280, height: 800 }, console: false });
    browser = opened.browser;
    const { page, problems } = opened;
    await page.goto(`${admin}/dashboard`);
    await page.waitForSelector('#status[data-live="true"]');
    const memTexts = async () =>
      page.$$eval("[data-gpu]", (gpus) =>
        gpus.map((g) => ({
          serves: g.querySelector(".gpu-serves")?.getAttribute("data-serves") ?? "",
          mem: g.querySelector('[data-meter="mem"] .num')?.textContent ?? "",
        })),
      );
    const drawn = await memTexts();
    expect(drawn).toHaveLength(8);
    for (const { serves, mem } of drawn) {
      // 90% of an H100's 81,559 MiB: "72 / 80 GiB"; a free GPU holds nothing: "0.0 / 80 GiB".
      if (serves !== "") expect({ serves, mem }).toEqual({ serves, mem: expect.stringMatching(/^(4[1-9]|[5-7]\d) \/ 80 GiB$/) });
      else expect({ serves, mem }).toEqual({ serves, mem: "0.0 / 80 GiB" });
    }

    // The same page when the agents stop reporting memory used: "not reported", drawn as absent, never 0.
    await page.route("**/admin/v1/dashboard", async (route) => {
      const res = await route.fetch();
      const body = (await res.json()) as { gpus: { memory_used_bytes: number | null }[] };
      for (const g of body.gpus) g.memory_used_bytes = null;
      await route.fulfill({ response: res, json: body });
    });
    await waitUntil(async () => (await memTexts()).every((g) => g.mem === "not reported"), {
      what: "every GPU's memory drawn as not reported",
      timeoutMs: 5_000,
    });
    expect(await page.locator('[data-gpu] [data-meter="mem"].absent').count()).toBe(8);
    expect(problems).toEqual([]);

    process.kill(demo!.pid, "SIGINT");
    expect(await demo!.exited).toBe(0);
  },
  120_000,
);
