/**
 * The dashboard on the admin listener: the page (/dashboard), its stylesheet
 * and scripts served as they are from this folder (no build step), and the
 * JSON snapshot it polls (/admin/v1/dashboard). The page is served with the
 * snapshot of that moment in a JSON data block, so it draws the fleet before
 * its first poll completes. The page's Content-Security-Policy allows this
 * origin only, so it can fetch nothing from elsewhere.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Elysia } from "elysia";
import { type DashboardSnapshot, dashboardSnapshotSchema } from "./snapshot.ts";

/** The page may load and connect to its own origin only (the icon is an inline empty data: URL). */
export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const ASSETS = {
  "dashboard.css": "text/css; charset=utf-8",
  "dashboard.js": "text/javascript; charset=utf-8",
  "traffic.js": "text/javascript; charset=utf-8",
} as const;

/** Read once at start: a gateway whose dashboard files are missing fails at start, not on a click. */
function loadAssets(): { page: string; assets: Record<keyof typeof ASSETS, string> } {
  const read = (name: string) => readFileSync(join(import.meta.dir, name), "utf8");
  return {
    page: read("index.html"),
    assets: { "dashboard.css": read("dashboard.css"), "dashboard.js": read("dashboard.js"), "traffic.js": read("traffic.js") },
  };
}

function asset(body: string, contentType: string, csp = false): Response {
  const headers: Record<string, string> = { "content-type": contentType, "cache-control": "no-cache", "x-content-type-options": "nosniff" };
  if (csp) headers["content-security-policy"] = DASHBOARD_CSP;
  return new Response(body, { headers });
}

const SNAPSHOT_SLOT = "<!--llmgw:snapshot-->";
const INITIAL_SNAPSHOT_ID = "initial-snapshot";

/**
 * The page with `snap` in a `<script type="application/json">` block: a data
 * block, which the browser never runs (so the CSP's script-src does not
 * apply), with every `<` escaped so no string in it can end the block.
 */
export function pageWithSnapshot(page: string, snap: DashboardSnapshot | undefined): string {
  if (snap === undefined) return page.replace(SNAPSHOT_SLOT, "");
  const json = JSON.stringify(snap).replaceAll("<", "\\u003c");
  return page.replace(SNAPSHOT_SLOT, () => `<script type="application/json" id="${INITIAL_SNAPSHOT_ID}">${json}</script>`);
}

const textDoc = (summary: string, type: string) => ({
  summary,
  responses: { 200: { description: summary, content: { [type]: { schema: { type: "string" as const } } } } },
});

/** `snapshot`: the fleet, GPUs, pools and traffic now. */
export function dashboardRoutes(snapshot: () => Promise<DashboardSnapshot> | DashboardSnapshot) {
  const { page, assets } = loadAssets();
  const app = new Elysia({ name: "dashboard" })
    .get(
      "/dashboard",
      async () => {
        // A snapshot that fails must not take the page with it: it then draws at its first poll.
        const snap = await Promise.resolve()
          .then(snapshot)
          .catch(() => undefined);
        return asset(pageWithSnapshot(page, snap), "text/html; charset=utf-8", true);
      },
      { detail: textDoc("The live dashboard (HTML with the current snapshot; polls /admin/v1/dashboard)", "text/html") },
    )
    .get("/admin/v1/dashboard", () => snapshot(), {
      response: dashboardSnapshotSchema,
      detail: { summary: "The dashboard's snapshot: nodes, GPUs, replicas, models, endpoints, pools and cumulative traffic counters" },
    });
  // One route per file: a fixed list, so no path from a request ever reaches the file system.
  // (The OpenAPI plugin leaves paths with a dot out of the document: static files, not API.)
  for (const [name, type] of Object.entries(ASSETS) as [keyof typeof ASSETS, string][]) {
    app.get(`/dashboard/${name}`, () => asset(assets[name], type), { detail: textDoc(`The dashboard's ${name}`, type.split(";")[0]!) });
  }
  return app;
}
