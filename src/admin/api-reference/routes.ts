/**
 * The API reference page (/openapi): a page of the project's own
 * (no third-party bundle, nothing from a CDN) that reads the OpenAPI
 * documents this listener serves — the admin API's (/openapi/json) and the
 * data plane's (/openapi/data-plane.json, the document the data plane
 * serves at /openapi.json) — and lays out every operation. Whoever controls a package on a CDN does not control the admin
 * origin, and the page works on an air-gapped network. Its
 * Content-Security-Policy keeps it on this origin: it loads, fetches and
 * posts nowhere else, and runs no inline script.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Elysia } from "elysia";

const API_REFERENCE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const API_REFERENCE_PATH = "/openapi";
/** Paths with a dot: the OpenAPI plugin leaves them out of the document (static files, not API). */
const SCRIPT_PATH = "/openapi/reference.js";
const STYLE_PATH = "/openapi/reference.css";
/** The data plane's document, served here too: the page may fetch from its own origin only. */
const DATA_PLANE_SPEC_PATH = "/openapi/data-plane.json";

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, specPaths: string): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${escapeHtml(title)}</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="${STYLE_PATH}" />
  </head>
  <body>
    <main id="reference" data-spec="${escapeHtml(specPaths)}"></main>
    <script src="${SCRIPT_PATH}"></script>
  </body>
</html>
`;
}

function file(body: string, contentType: string, csp?: string): Response {
  const headers: Record<string, string> = { "content-type": contentType, "x-content-type-options": "nosniff", "cache-control": "no-cache" };
  if (csp !== undefined) headers["content-security-policy"] = csp;
  return new Response(body, { headers });
}

/** GET /openapi (the page), its script and stylesheet, and the data plane's document; the admin API's (/openapi/json) is the OpenAPI plugin's. */
export function apiReferenceRoutes(opts: { title: string; specPath: string; dataPlane: () => unknown }) {
  // Read once at start: a gateway whose files are missing fails at start, not when someone opens the page.
  const read = (name: string) => readFileSync(join(import.meta.dir, name), "utf8");
  const script = read("reference.js");
  const style = read("reference.css");
  const html = page(opts.title, `${opts.specPath} ${DATA_PLANE_SPEC_PATH}`);
  let dataPlane: string | undefined;
  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "api-reference" })
    .get(API_REFERENCE_PATH, () => file(html, "text/html; charset=utf-8", API_REFERENCE_CSP), hidden)
    .get(SCRIPT_PATH, () => file(script, "text/javascript; charset=utf-8"), hidden)
    .get(STYLE_PATH, () => file(style, "text/css; charset=utf-8"), hidden)
    .get(DATA_PLANE_SPEC_PATH, () => file((dataPlane ??= JSON.stringify(opts.dataPlane())), "application/json"), hidden);
}
