/** Several `llmgw serve` processes sharing one redis-server (issue 14), for the cluster end-to-end tests. */
import type { ClusterStatus } from "../../src/protocol/cluster-status.ts";
import { type Gateway, startGateway, startSim } from "./cluster.ts";
import { waitUntil } from "./processes.ts";
import type { RedisServer } from "./redis-server.ts";

export interface ClusterGateway extends Gateway {
  name: string;
  cluster(): Promise<ClusterStatus>;
  readyz(): Promise<{ ready: boolean; state?: { redis_up: boolean; fail_static: boolean; leader: boolean; gateways: number } }>;
}

/** `n` gateways named gw-0… on `config` plus a redis state block (lease, sync and anything in `state`). */
export async function startGatewayCluster(
  redis: RedisServer,
  n: number,
  config: Record<string, unknown>,
  opts: { readyEndpoints?: number; state?: Record<string, unknown> } = {},
): Promise<ClusterGateway[]> {
  const gws = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const name = `gw-${i}`;
      const gw = await startGateway(
        { ...config, state: { backend: "redis", redis_url: redis.url, gateway_id: name, ...opts.state } },
        opts.readyEndpoints ?? 0,
      );
      return Object.assign(gw, {
        name,
        async cluster() {
          return (await (await fetch(`${gw.admin}/admin/v1/cluster`)).json()) as ClusterStatus;
        },
        async readyz() {
          return (await (await fetch(`${gw.admin}/readyz`)).json()) as Awaited<ReturnType<ClusterGateway["readyz"]>>;
        },
      });
    }),
  );
  // Every gateway has seen all the others in the demand exchange.
  await waitUntil(async () => (await Promise.all(gws.map((g) => g.cluster()))).every((c) => c.gateways === n), {
    timeoutMs: 15_000,
    what: `${n} gateways in the demand exchange`,
  });
  return gws;
}

/** The gateway holding the reconciler lease, once exactly one does. */
export async function leaderOf(gws: readonly ClusterGateway[], timeoutMs = 15_000): Promise<ClusterGateway> {
  return waitUntil(
    async () => {
      const statuses = await Promise.all(gws.map((g) => g.cluster().catch(() => undefined)));
      const leaders = gws.filter((_, i) => statuses[i]?.leader.self);
      return leaders.length === 1 ? leaders[0] : undefined;
    },
    { timeoutMs, intervalMs: 20, what: "one leader" },
  );
}

/** The API keys of startTenantCluster: `acme` has a requests-per-minute quota, `free` none. */
export const ACME_KEY = "acme-key-0123456789";
export const FREE_KEY = "free-key-0123456789";

/** Three sim-engines (model "m", `itlMs` per token) behind three gateways sharing `redis`, tenant acme limited to `rpm`. */
export async function startTenantCluster(redis: RedisServer, rpm: number, opts: { itlMs: number; state: Record<string, unknown> }): Promise<ClusterGateway[]> {
  const sims = await Promise.all([0, 1, 2].map(() => startSim(["--model", "m", "--itl-ms", String(opts.itlMs), "--prefill-overhead-ms", "1"])));
  const config = {
    log_level: "warn",
    endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api })),
    auth: {
      keys: [
        { key: ACME_KEY, tenant: "acme" },
        { key: FREE_KEY, tenant: "free" },
      ],
    },
    tenants: [{ name: "acme", requests_per_minute: rpm }],
  };
  return startGatewayCluster(redis, 3, config, { readyEndpoints: 3, state: opts.state });
}
