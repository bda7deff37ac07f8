/**
 * The dashboard on the admin listener: the page (/dashboard), its stylesheet
 * and scripts served as they are from this folder (no build step), and the
 * JSON snapshot it polls (/admin/v1/dashboard). The page's Content-Security-
 * Policy allows this origin only, so it can fetch nothing from elsewhere.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Elysia } from "elysia";
import { dashboardSnapshotSchema, type DashboardSnapshot } from "./snapshot.ts";

/** The page may load and connect to its own origin only (the icon is an inline empty data: URL). */
export const DASHBOARD_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const ASSETS = {
  "dashboard.css": "text/css; charset=utf-8",
  "dashboard.js": "text/javascript; charset=utf-8",
  "traffic.js": "text/javascript; charset=utf-8",
} as const;

/** Read once at start: a gateway whose dashboard files are missing fails at start, not on a click. */
function loadAssets(): { page: string; assets: Record<keyof typeof ASSETS, string> } {
  const read = (name: string) => readFileSync(join(import.meta.dir, name), "utf8");
  return { page: read("index.html"), assets: { "dashboard.css": read("dashboard.css"), "dashboard.js": read("dashboard.js"), "traffic.js": read("traffic.js") } };
}

function asset(body: string, contentType: string, csp = false): Response {
  const headers: Record<string, string> = { "content-type": contentType, "cache-control": "no-cache", "x-content-type-options": "nosniff" };
  if (csp) headers["content-security-policy"] = DASHBOARD_CSP;
  return new Response(body, { headers });
}

const textDoc = (summary: string, type: string) => ({ summary, responses: { 200: { description: summary, content: { [type]: { schema: { type: "string" as const } } } } } });

/** `snapshot`: the fleet, GPUs, pools and traffic now. */
export function dashboardRoutes(snapshot: () => Promise<DashboardSnapshot> | DashboardSnapshot) {
  const { page, assets } = loadAssets();
  const app = new Elysia({ name: "dashboard" })
    .get("/dashboard", () => asset(page, "text/html; charset=utf-8", true), { detail: textDoc("The live dashboard (HTML; polls /admin/v1/dashboard)", "text/html") })
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
