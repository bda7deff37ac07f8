/**
 * Scenario (the attacks on the admin listener, in a real browser): Debian's
 * Chromium through playwright-core. A page on another origin fires 30
 * `no-cors` POSTs at /admin/v1/diagnostics/gc and submits a plain form to
 * it: every one is refused before it runs (counted as `origin` refusals, not
 * one reaching the token check), and the same page cannot read the
 * management API. A page reached under a rebinding name (attacker.example
 * resolved to the listener by Chromium's host-resolver rules) is refused
 * with 421. On its own origin the dashboard keeps working, and the API
 * reference renders from the listener's own files with no request off it.
 */
import { afterAll, beforeAll, expect } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { CHROMIUM_FLAGS, pageProblems } from "../helpers/chromium.ts";
import { counterValue, type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { findTool, testWithTool } from "../helpers/system-tools.ts";

const ADMIN_TOKEN = "chromium-door-admin-token-0123";
const POSTS = 30;
const tmp = mkdtempSync(join(tmpdir(), "admin-chromium-"));
let gw: Gateway;
let attacker: ReturnType<typeof Bun.serve> | undefined;
let browser: BrowserContext | undefined;
const runs = findTool("chromium") !== null;

/** The attacker's page: no-cors POSTs, a form posted into a frame, and a CORS read; it reports what it could see. */
function attackerPage(admin: string): string {
  const script = `
    const admin = ${JSON.stringify(admin)};
    window.results = { posts: 0, readable: null, done: false };
    (async () => {
      for (let i = 0; i < ${POSTS}; i++) {
        try { await fetch(admin + "/admin/v1/diagnostics/gc", { method: "POST", mode: "no-cors", body: "{}" }); window.results.posts++; } catch {}
      }
      try { await (await fetch(admin + "/admin/v1/endpoints")).text(); window.results.readable = true; } catch { window.results.readable = false; }
      const frame = document.createElement("iframe"); frame.name = "sink"; document.body.appendChild(frame);
      const form = document.createElement("form"); form.method = "POST"; form.action = admin + "/admin/v1/diagnostics/gc"; form.target = "sink";
      const input = document.createElement("input"); input.name = "x"; input.value = "1"; form.appendChild(input);
      document.body.appendChild(form);
      frame.addEventListener("load", () => { window.results.done = true; });
      form.submit();
    })();`;
  return `<!doctype html><html><body><script>${script}</script></body></html>`;
}

async function refusals(): Promise<Record<string, number>> {
  const text = await gw.metrics();
  return Object.fromEntries(["host", "origin", "media_type", "token"].map((reason) => [reason, counterValue(text, "llmgw_admin_refusals_total", { reason })]));
}

beforeAll(async () => {
  if (!runs) return;
  const sim = await startSim(["--model", "m"]);
  gw = await startGateway(
    { data_dir: join(tmp, "data"), endpoints: [{ id: "sim", url: sim.api }], admin: { token: ADMIN_TOKEN }, health: { poll_interval_ms: 200 } },
    1,
  );
  const html = attackerPage(gw.admin);
  attacker = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(html, { headers: { "content-type": "text/html" } }) });
  browser = await chromium.launchPersistentContext(mkdtempSync(join(tmp, "profile-")), {
    executablePath: findTool("chromium")!,
    headless: true,
    // attacker.example resolves to the listener: what a DNS-rebinding page's requests look like once the name points there.
    args: [...CHROMIUM_FLAGS, "--host-resolver-rules=MAP attacker.example 127.0.0.1"],
  });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await attacker?.stop(true);
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

async function newPage(): Promise<{ page: Page; problems: string[]; requested: string[] }> {
  const page = await browser!.newPage();
  const problems = pageProblems(page);
  const requested: string[] = [];
  page.on("request", (r) => requested.push(r.url()));
  return { page, problems, requested };
}

testWithTool(
  "chromium",
  `a page on another origin: ${POSTS} no-cors POSTs and a form POST to gc are all refused before the token check, and it cannot read the management API`,
  async () => {
    const before = await refusals();
    const { page } = await newPage();
    await page.goto(`http://127.0.0.1:${attacker!.port}/`);
    await waitUntil(async () => (await page.evaluate("window.results.done")) === true, { timeoutMs: 20_000, what: "the attacker page to finish" });
    expect(await page.evaluate("window.results.posts")).toBe(POSTS);
    expect(await page.evaluate("window.results.readable")).toBe(false);
    const after = await refusals();
    expect({ origin: after.origin! - before.origin!, token: after.token! - before.token!, media_type: after.media_type! - before.media_type! }).toEqual({
      origin: POSTS + 1,
      token: 0,
      media_type: 0,
    });
    await page.close();
  },
  60_000,
);

testWithTool(
  "chromium",
  "a page under a rebinding name gets 421 for the dashboard, the management API and the OpenAPI document",
  async () => {
    const port = new URL(gw.admin).port;
    const { page } = await newPage();
    for (const path of ["/dashboard", "/admin/v1/endpoints", "/openapi/json"]) {
      const res = await page.goto(`http://attacker.example:${port}${path}`);
      expect({ path, status: res?.status() }).toEqual({ path, status: 421 });
    }
    await page.close();
  },
  60_000,
);

testWithTool(
  "chromium",
  "on its own origin the dashboard keeps working: live, the endpoint shown, nothing requested elsewhere",
  async () => {
    const { page, problems, requested } = await newPage();
    await page.goto(`${gw.admin}/dashboard`);
    await page.waitForSelector('#status[data-live="true"]', { timeout: 10_000 });
    await page.waitForSelector('#endpoints tr[data-endpoint="sim"]', { timeout: 10_000 });
    const origin = new URL(gw.admin).origin;
    expect(requested.filter((u) => !u.startsWith(origin) && !u.startsWith("data:"))).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  },
  60_000,
);

testWithTool(
  "chromium",
  "the API reference renders both documents from the listener's own files: no request off the admin origin, no error",
  async () => {
    const { page, problems, requested } = await newPage();
    const res = await page.goto(`${gw.admin}/openapi`);
    expect(res?.headers()["content-security-policy"]).toContain("script-src 'self'");
    // The page lays out each operation with its summary once the document is loaded.
    await page.waitForSelector('#reference[data-rendered="true"]', { timeout: 20_000 });
    await page.getByText("Every endpoint with readiness, load and circuit state").first().waitFor({ timeout: 20_000 });
    // The data plane's document follows the admin API's on the same page.
    await page.getByText("llmgw data plane").first().waitFor({ timeout: 20_000 });
    await page.getByText("/v1/chat/completions").first().waitFor({ timeout: 20_000 });
    const origin = new URL(gw.admin).origin;
    expect(requested.filter((u) => !u.startsWith(origin) && !u.startsWith("data:"))).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  },
  60_000,
);
