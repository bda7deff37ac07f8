/**
 * The admin API's reference page (/openapi): Scalar's standalone bundle,
 * pinned exactly in package.json and served by the admin listener itself —
 * no CDN, so whoever controls a package on a CDN does not control the admin
 * origin, and the page works on an air-gapped network. The bundle travels
 * inside a `bun build --compile` binary too (scalar-standalone.js). The
 * page's Content-Security-Policy keeps it on this origin: it loads, fetches
 * and posts nowhere else.
 */
import { readFileSync } from "node:fs";
import { Elysia } from "elysia";
import standalone from "./scalar-standalone.js";

/** Scalar injects its styles at run time, hence 'unsafe-inline' for styles (not scripts). */
export const API_REFERENCE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const API_REFERENCE_PATH = "/openapi";
/** A path with a dot: the OpenAPI plugin leaves it out of the document (a static file, not API). */
const SCRIPT_PATH = "/openapi/scalar-standalone.js";

/** Scalar's configuration: the document from this listener, no fonts from Scalar's servers. */
function configuration(specPath: string): string {
  return JSON.stringify({ url: specPath, withDefaultFonts: false, hideDownloadButton: false, theme: "default" });
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, specPath: string): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${escapeHtml(title)}</title>
    <link rel="icon" href="data:," />
  </head>
  <body>
    <script id="api-reference" data-configuration="${escapeHtml(configuration(specPath))}"></script>
    <script src="${SCRIPT_PATH}"></script>
  </body>
</html>
`;
}

/** GET /openapi (the page) and its script; the document itself (/openapi/json) is the OpenAPI plugin's. */
export function apiReferenceRoutes(opts: { title: string; specPath: string }) {
  // Read once at start: a gateway whose bundle is missing fails at start, not when someone opens the page.
  const script = readFileSync(standalone);
  const html = page(opts.title, opts.specPath);
  return new Elysia({ name: "api-reference" })
    .get(
      API_REFERENCE_PATH,
      () => new Response(html, { headers: { "content-type": "text/html; charset=utf-8", "content-security-policy": API_REFERENCE_CSP, "x-content-type-options": "nosniff", "cache-control": "no-cache" } }),
      { detail: { hide: true } },
    )
    .get(SCRIPT_PATH, () => new Response(script, { headers: { "content-type": "text/javascript; charset=utf-8", "x-content-type-options": "nosniff", "cache-control": "no-cache" } }), { detail: { hide: true } });
}
