/**
 * One gateway's part in a cluster of gateways sharing Redis: the
 * reconciler lease (and the fleet leadership built on it), the demand
 * exchange that sets its admission shares, the autoscaler's demand from
 * followers to the leader, the shared quotas, and the status
 * the admin listener, /readyz and the metrics report — including whether it
 * is failing static because Redis cannot be reached.
 */
import { hostname } from "node:os";
import type { Config } from "../config/types.ts";
import type { FleetLeadership } from "../control/fleet-manager.ts";
import type { ClusterStatus } from "../protocol/cluster-status.ts";
import type { PoolShareTable } from "../shared/pool-shares.ts";
import { AutoscaleDemandExchange } from "./autoscale-demand-exchange.ts";
import { ClusterQuota } from "./cluster-quota.ts";
import { DemandExchange, type DemandSource } from "./demand-exchange.ts";
import { LeaderLease } from "./leader-lease.ts";
import type { RedisConnection } from "./redis-connection.ts";

interface ClusterDeps {
  shares: PoolShareTable;
  demand: DemandSource;
}

/** A gateway's default name: unique per process, readable in logs. */
function defaultGatewayId(): string {
  return `${hostname()
    .replace(/[^A-Za-z0-9._-]/g, "-")
    .slice(0, 40)}-${process.pid}`;
}

export class ClusterRuntime {
  readonly gatewayId: string;
  readonly lease: LeaderLease;
  readonly demand: DemandExchange;
  readonly quota: ClusterQuota;
  /** Followers' autoscaling demand, for the leader's autoscaler. */
  readonly autoscaleDemand: AutoscaleDemandExchange;
  readonly #redis: RedisConnection;
  readonly #config: Config;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(config: Config, redis: RedisConnection, deps: ClusterDeps) {
    const s = config.state;
    this.#config = config;
    this.#redis = redis;
    this.gatewayId = s.gatewayId ?? defaultGatewayId();
    this.lease = new LeaderLease(redis, { me: this.gatewayId, leaseMs: s.leaseMs, prefix: s.keyPrefix });
    this.demand = new DemandExchange(redis, {
      prefix: s.keyPrefix,
      me: this.gatewayId,
      intervalMs: s.syncIntervalMs,
      source: deps.demand,
      shares: deps.shares,
    });
    this.autoscaleDemand = new AutoscaleDemandExchange(redis, { prefix: s.keyPrefix, me: this.gatewayId });
    this.quota = new ClusterQuota(config.tenants, redis, { prefix: s.keyPrefix, allowance: s.quotaAllowance, gateways: () => this.demand.gateways });
  }

  /** What the fleet manager needs to lead or follow. */
  leadership(): FleetLeadership {
    return {
      isLeader: () => this.lease.isLeader(),
      fencingToken: () => this.lease.fencingToken(),
      fenced: () => this.lease.fenced(),
      refreshEveryMs: this.#config.state.syncIntervalMs,
    };
  }

  start(): void {
    this.lease.start();
    this.demand.start();
    this.#timer ??= setInterval(() => void this.quota.tick(), this.#config.state.syncIntervalMs);
  }

  /** Hand the lease over and leave the demand exchange (a clean stop costs the others nothing). */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.all([this.lease.stop(), this.demand.stop()]);
  }

  status(): ClusterStatus {
    const r = this.#redis;
    const lease = this.lease.status();
    const demand = this.demand.status();
    return {
      gateway: this.gatewayId,
      redis: { target: r.target, up: r.up, down_since_ms: r.downSince ?? null, last_error: r.lastError ?? null, commands: r.commands, failures: r.failures },
      leader: { self: lease.leader, token: lease.token ?? null, holder: lease.holder ?? null, holder_token: lease.holderToken ?? null },
      gateways: demand.gateways,
      shares: demand.shares,
      shares_at_ms: demand.exchangedAt ?? null,
      quota: { local: this.quota.stats.local, fetched: this.quota.stats.fetched, fail_static: this.quota.stats.failStatic, fetches: this.quota.stats.fetches },
    };
  }
}
