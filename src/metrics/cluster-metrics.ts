/**
 * Metrics of a gateway among several sharing Redis, read from the
 * cluster runtime's status when Prometheus scrapes: nothing on the request
 * path. Registered only with state.backend: redis (absent otherwise).
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { ClusterStatus } from "../protocol/cluster-status.ts";
import { CLUSTER, QUOTA_SOURCES } from "./names.ts";

export function registerClusterMetrics(registry: Registry, status: () => ClusterStatus): void {
  const registers = [registry];
  const gauge = (m: { name: string; help: string }, value: (s: ClusterStatus) => number) =>
    new Gauge({
      name: m.name,
      help: m.help,
      registers,
      collect() {
        this.set(value(status()));
      },
    });
  const counter = (m: { name: string; help: string }, value: (s: ClusterStatus) => number) =>
    new Counter({
      name: m.name,
      help: m.help,
      registers,
      collect() {
        this.reset();
        this.inc(value(status()));
      },
    });
  gauge(CLUSTER.redisUp, (s) => (s.redis.up ? 1 : 0));
  gauge(CLUSTER.leader, (s) => (s.leader.self ? 1 : 0));
  gauge(CLUSTER.gateways, (s) => s.gateways);
  counter(CLUSTER.redisCommands, (s) => s.redis.commands);
  counter(CLUSTER.redisFailures, (s) => s.redis.failures);
  new Gauge({
    name: CLUSTER.poolShare.name,
    help: CLUSTER.poolShare.help,
    labelNames: CLUSTER.poolShare.labels,
    registers,
    collect() {
      this.reset();
      for (const [pool, share] of Object.entries(status().shares)) this.set({ pool }, share);
    },
  });
  new Counter({
    name: CLUSTER.quotaDecisions.name,
    help: CLUSTER.quotaDecisions.help,
    labelNames: CLUSTER.quotaDecisions.labels,
    registers,
    collect() {
      const q = status().quota;
      this.reset();
      for (const source of QUOTA_SOURCES) this.inc({ source }, source === "local" ? q.local : source === "fetched" ? q.fetched : q.fail_static);
    },
  });
}
