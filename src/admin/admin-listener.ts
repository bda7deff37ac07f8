/**
 * The admin listener (loopback by default) and the optional metrics-only
 * listener, on Elysia: they are cold paths. Admin serves the endpoint table
 * as JSON with an OpenAPI description (/openapi, /openapi/json), Prometheus
 * metrics, /healthz (process alive) and /readyz (workers up and at least one
 * endpoint ready), the live dashboard (/dashboard), the keys API
 * (/admin/v1/keys, keys-routes.ts), and the fleet's
 * management API when the gateway runs a fleet. The metrics listener serves /metrics, /healthz and /readyz and
 * nothing else. Any other path is an OpenAI-shaped 404 on both. Every
 * request to the admin listener passes its door first (request-guard.ts:
 * Host, and for changes Origin, media type and the admin token).
 */

import { heapStats } from "bun:jsc";
import { openapi } from "@elysiajs/openapi";
import { Elysia } from "elysia";
import { z } from "zod";
import type { fleetApi } from "../control/fleet-api.ts";
import { FLEET_API_PREFIX } from "../control/fleet-api-schemas.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { dataPlaneOpenApi } from "../gateway/openapi/data-plane-openapi.ts";
import { AGENT_REGISTRATION_PATH } from "../protocol/agent-messages.ts";
import { CIRCUIT_CLOSED, type EndpointTable, F, FLAVOR_CODES, I, modelCircuitField } from "../shared/endpoint-table.ts";
import { errorResponse, LlmgwError } from "../shared/errors.ts";
import { malformedPathError } from "../shared/path-segment.ts";
import { API_REFERENCE_PATH, apiReferenceRoutes } from "./api-reference/routes.ts";
import { dashboardRoutes } from "./dashboard/routes.ts";
import type { DashboardSnapshot } from "./dashboard/snapshot.ts";
import { keysRoutes } from "./keys-routes.ts";
import { noFleetApi } from "./no-fleet-api.ts";
import { reloadRoute } from "./reload-route.ts";
import { adminRequestGuard } from "./request-guard.ts";

const ADMIN_API_TITLE = "llmgw admin API";

const circuitNames = ["closed", "open", "half_open", "probing"] as const;

const endpointStateSchema = z.object({
  id: z.string(),
  url: z.string(),
  pool: z.string(),
  node: z.string().nullable().describe("the node of a fleet replica; null for a static endpoint"),
  models: z.array(z.string()),
  ready: z.boolean(),
  healthy: z.boolean(),
  draining: z.boolean(),
  circuit: z.enum(circuitNames),
  model_circuits: z
    .record(z.string(), z.enum(circuitNames))
    .describe("circuits of the endpoint's models that are not closed (a 429, 5xx or timeout counts against the model)"),
  gpu_faulted: z.boolean(),
  inflight: z.number().int().describe("requests holding the endpoint (claimed and not yet finished)"),
  waiting: z.number().int().nullable().describe("engine-reported; null when absent"),
  running: z.number().int().nullable().describe("engine-reported; null when absent"),
  kv_usage: z.number().nullable().describe("[0,1]; null when absent"),
  metrics_age_s: z.number().nullable(),
  flavor: z.enum(FLAVOR_CODES),
  capacity: z.number().int().describe("learned batch capacity (0 until the scheduler computed it)"),
  poll_failures: z.number().int(),
});
type EndpointState = z.infer<typeof endpointStateSchema>;

function modelCircuits(t: EndpointTable, row: number, models: readonly string[]): Record<string, (typeof circuitNames)[number]> {
  const out: Record<string, (typeof circuitNames)[number]> = {};
  models.forEach((model, pos) => {
    const field = modelCircuitField(pos);
    const state = field < 0 ? CIRCUIT_CLOSED : t.getInt(row, field);
    if (state !== CIRCUIT_CLOSED) out[model] = circuitNames[state] ?? "open";
  });
  return out;
}

export function endpointStates(ctx: GatewayContext): EndpointState[] {
  const t: EndpointTable = ctx.table;
  const now = Date.now();
  return ctx.endpoints.active().map(({ index: row, spec: e }) => {
    const kv = t.getFloat(row, F.KV_USAGE);
    const at = t.getFloat(row, F.METRICS_AT);
    return {
      id: e.id,
      url: e.url,
      pool: e.pool,
      node: e.node ?? null,
      models: [...ctx.catalog.modelsOf(row)],
      ready: t.getInt(row, I.READY) === 1,
      healthy: t.getInt(row, I.HEALTHY) === 1,
      draining: t.getInt(row, I.DRAINING) === 1,
      circuit: circuitNames[t.getInt(row, I.CIRCUIT)] ?? "closed",
      model_circuits: modelCircuits(t, row, ctx.catalog.modelsOf(row)),
      gpu_faulted: t.getInt(row, I.GPU_FAULTED) === 1,
      inflight: t.getInt(row, I.INFLIGHT),
      waiting: t.optionalInt(row, I.WAITING) ?? null,
      running: t.optionalInt(row, I.RUNNING) ?? null,
      kv_usage: Number.isNaN(kv) ? null : kv,
      metrics_age_s: Number.isNaN(at) ? null : Math.max(0, (now - at) / 1000),
      flavor: FLAVOR_CODES[t.getInt(row, I.FLAVOR)] ?? "unknown",
      capacity: t.getInt(row, I.CAPACITY),
      poll_failures: t.getInt(row, I.POLL_FAILURES),
    };
  });
}

const stateReadinessSchema = z
  .object({
    backend: z.literal("redis"),
    redis_up: z.boolean(),
    fail_static: z
      .boolean()
      .describe("Redis cannot be reached: serving with the last shares and local quota shares; uploads, batches and idempotent requests get 503"),
    down_since_ms: z.number().nullable(),
    leader: z.boolean().describe("this gateway holds the reconciler lease"),
    gateways: z.number().int(),
  })
  .describe("several gateways sharing Redis (state.backend: redis); absent with the embedded state");

const readinessSchema = z.object({
  ready: z.boolean(),
  endpoints_ready: z.number().int(),
  endpoints: z.number().int(),
  state: stateReadinessSchema.optional(),
});

function readiness(ctx: GatewayContext): z.infer<typeof readinessSchema> {
  let n = 0;
  const active = ctx.endpoints.active();
  for (const { index: row } of active) {
    if (ctx.table.getInt(row, I.READY) === 1 && ctx.table.getInt(row, I.CIRCUIT) === CIRCUIT_CLOSED) n++;
  }
  const out: z.infer<typeof readinessSchema> = { ready: n > 0, endpoints_ready: n, endpoints: active.length };
  // Redis away does not make the gateway unready: a load balancer that drained every gateway for it would defeat failing static.
  const c = ctx.cluster?.status();
  if (c)
    out.state = {
      backend: "redis",
      redis_up: c.redis.up,
      fail_static: !c.redis.up,
      down_since_ms: c.redis.down_since_ms,
      leader: c.leader.self,
      gateways: c.gateways,
    };
  return out;
}

const clusterStatusSchema = z.object({
  gateway: z.string(),
  redis: z.object({
    target: z.string(),
    up: z.boolean(),
    down_since_ms: z.number().nullable(),
    last_error: z.string().nullable(),
    commands: z.number().int(),
    failures: z.number().int(),
  }),
  leader: z.object({ self: z.boolean(), token: z.number().int().nullable(), holder: z.string().nullable(), holder_token: z.number().int().nullable() }),
  gateways: z.number().int(),
  shares: z.record(z.string(), z.number()),
  shares_at_ms: z.number().nullable(),
  quota: z.object({ local: z.number().int(), fetched: z.number().int(), fail_static: z.number().int(), fetches: z.number().int() }),
});

/** What the listeners need to know beyond the context. */
export interface ListenerState {
  /**
   * Whether the health worker finished its first round of engine polls. Until
   * then /metrics answers 503: an empty scrape target looks like a working one.
   */
  enginesPolled(): boolean;
}

/** An unknown path: OpenAI-shaped 404 (Elysia's default is a bare "NOT_FOUND"). */
function notFound(request: Request): Response {
  // A request without Host (HTTP/1.0) has a relative URL: the base stands in for the missing authority.
  return errorResponse(new LlmgwError("NOT_FOUND", `no route ${request.method} ${new URL(request.url, "http://host.invalid").pathname} on this listener`));
}

/** /metrics, /healthz, /readyz: shared by the admin and the metrics-only listener. */
function observability(ctx: GatewayContext, state: ListenerState) {
  return new Elysia({ name: "observability" })
    .get(
      "/metrics",
      async () => {
        if (!state.enginesPolled()) return errorResponse(new LlmgwError("METRICS_NOT_READY", "metrics not ready: the first engine poll has not completed"));
        return new Response(await ctx.metrics.registry.metrics(), { headers: { "content-type": ctx.metrics.registry.contentType } });
      },
      {
        detail: {
          summary: "Prometheus metrics (503 until the first poll round completed)",
          responses: {
            200: { description: "Prometheus text exposition format", content: { "text/plain": { schema: { type: "string" } } } },
            503: { description: "METRICS_NOT_READY: the first poll round has not completed (OpenAI error shape)" },
          },
        },
      },
    )
    .get("/healthz", () => ({ status: "ok" as const }), { response: z.object({ status: z.literal("ok") }), detail: { summary: "The process is alive" } })
    .get(
      "/readyz",
      ({ set }) => {
        const r = readiness(ctx);
        if (!r.ready) set.status = 503;
        return r;
      },
      { response: { 200: readinessSchema, 503: readinessSchema }, detail: { summary: "At least one endpoint is ready to serve" } },
    );
}

/**
 * `fleet`: the fleet manager's management API (src/control/fleet-api.ts), when
 * the gateway runs one; `dashboard`: the snapshot behind /dashboard
 * (src/admin/dashboard/dashboard-source.ts; without it, no dashboard).
 */
/** 400 for a path with a malformed percent-escape, undefined otherwise. */
function malformedPath(request: Request): Response | undefined {
  const err = malformedPathError(new URL(request.url, "http://host.invalid").pathname);
  return err === undefined ? undefined : errorResponse(err);
}

export function createAdminApp(
  ctx: GatewayContext,
  state: ListenerState,
  fleet?: ReturnType<typeof fleetApi>,
  dashboard?: () => Promise<DashboardSnapshot>,
  reload?: Parameters<typeof reloadRoute>[0],
) {
  const door = adminRequestGuard({
    token: ctx.config.admin.token,
    allowedHosts: ctx.config.admin.allowedHosts,
    listenHost: ctx.config.adminListen.host,
    ownCredentialPaths: [AGENT_REGISTRATION_PATH],
    inertPrefixes: fleet ? [] : [FLEET_API_PREFIX],
    onRefusal: (reason) => ctx.metrics.adminRefusals.inc({ reason }),
  });
  const app = new Elysia()
    // Then the path: a malformed percent-escape names no node or model (Elysia would hand the route U+FFFD or null).
    .onRequest(({ request }) => door(request) ?? malformedPath(request))
    // An LlmgwError first: Elysia takes its own `code` (NOT_FOUND for "no node 'x'") for a missing route.
    .onError(({ code, error, request }) => (error instanceof LlmgwError ? errorResponse(error) : code === "NOT_FOUND" ? notFound(request) : undefined))
    .use(
      openapi({
        documentation: { info: { title: ADMIN_API_TITLE, version: "0.1.0", description: "Management API of an llmgw gateway." } },
        mapJsonSchema: { zod: z.toJSONSchema },
        // The plugin's page loads Scalar from a CDN: the page is ours (api-reference/), the document the plugin's.
        provider: null,
      }),
    )
    .use(apiReferenceRoutes({ title: ADMIN_API_TITLE, specPath: `${API_REFERENCE_PATH}/json`, dataPlane: dataPlaneOpenApi }))
    .use(observability(ctx, state))
    .get("/admin/v1/endpoints", () => ({ endpoints: endpointStates(ctx) }), {
      response: z.object({ endpoints: z.array(endpointStateSchema) }),
      detail: { summary: "Every endpoint with readiness, load and circuit state" },
    })
    .get("/admin/v1/diagnostics/memory", () => memoryState(), {
      response: memoryStateSchema,
      detail: { summary: "The process's memory: resident set, JavaScript heap, external buffers (bytes)" },
    })
    .get(
      "/admin/v1/diagnostics/heap",
      () => {
        const h = heapStats();
        const top = Object.entries(h.objectTypeCounts)
          .sort((a, b) => b[1] - a[1])
          .slice(0, 40);
        return {
          heap_size: h.heapSize,
          heap_capacity: h.heapCapacity,
          extra_memory: h.extraMemorySize,
          object_count: h.objectCount,
          object_types: Object.fromEntries(top),
        };
      },
      {
        response: z.object({
          heap_size: z.number().int(),
          heap_capacity: z.number().int(),
          extra_memory: z.number().int(),
          object_count: z.number().int(),
          object_types: z.record(z.string(), z.number().int()),
        }),
        detail: { summary: "JavaScript heap: size, capacity, and the 40 most numerous object types (to find what a leak holds)" },
      },
    )
    .post(
      "/admin/v1/diagnostics/gc",
      () => {
        const before = memoryState();
        Bun.gc(true);
        return { before, after: memoryState() };
      },
      {
        response: z.object({ before: memoryStateSchema, after: memoryStateSchema }),
        detail: {
          summary: "Run a full garbage collection now (for memory measurements; it pauses the gateway for its duration)",
          description: "Needs `Authorization: Bearer <admin token>`.",
        },
      },
    );
  if (dashboard) app.use(dashboardRoutes(dashboard));
  app.use(keysRoutes({ auth: ctx.auth, liveKeys: ctx.liveKeys }));
  app.use(reloadRoute(reload));
  const cluster = ctx.cluster;
  if (cluster) {
    app.get("/admin/v1/cluster", () => cluster.status(), {
      response: clusterStatusSchema,
      detail: {
        summary:
          "This gateway among several sharing Redis: its name, Redis reachability and command counts, the reconciler lease, admission shares, quota sources",
      },
    });
  }
  return fleet ? app.use(fleet) : app.use(noFleetApi());
}

const memoryStateSchema = z.object({
  rss: z.number().int(),
  heap_used: z.number().int(),
  heap_total: z.number().int(),
  external: z.number().int(),
  array_buffers: z.number().int(),
});

function memoryState(): z.infer<typeof memoryStateSchema> {
  const m = process.memoryUsage();
  return { rss: m.rss, heap_used: m.heapUsed, heap_total: m.heapTotal, external: m.external, array_buffers: m.arrayBuffers };
}

export function createMetricsApp(ctx: GatewayContext, state: ListenerState) {
  return new Elysia().onError(({ code, request }) => (code === "NOT_FOUND" ? notFound(request) : undefined)).use(observability(ctx, state));
}
