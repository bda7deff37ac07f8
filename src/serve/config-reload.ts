/** Re-reads the config file and applies what can change live, or refuses the whole reload naming the keys that need a restart. */

import type { Registry } from "prom-client";
import { Counter, Gauge } from "prom-client";
import { ConfigError } from "../config/load.ts";
import { planReload, type ReloadOutcome, type ReloadPlan } from "../config/reload-plan.ts";
import type { Config } from "../config/types.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { ContinuationPolicy, refusalsFileOf } from "../gateway/continuation-policy.ts";
import { RetryBudget } from "../gateway/retry-budget.ts";
import { RouteSupport } from "../gateway/route-support.ts";
import { CONFIG_RELOAD, CONFIG_RELOAD_RESULTS, OTHER_TENANT } from "../metrics/names.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { profileInputs } from "../scheduling/profile-inputs.ts";
import { I, SLOT_FREE } from "../shared/endpoint-table.ts";
import type { Logger } from "../shared/logger.ts";
import { fleetEnabled } from "./fleet-wiring.ts";
import type { SharedTables } from "./gateway-parts.ts";
import type { LiveContext } from "./live-context.ts";

interface ReloadDeps {
  /** Reads and validates the file again, with the same flags and environment as at start (throws ConfigError). */
  read: () => Config;
  live: LiveContext;
  tables: Pick<SharedTables, "prefixIndex" | "kvIndex">;
  /** The in-process quota limiter; undefined when quotas are shared through Redis (their limits need a restart of every gateway). */
  quota: { reconfigure(tenants: Config["tenants"]): void } | undefined;
  /** How the data plane builds its authenticator from a config (the same call as at start). */
  authFor: (config: Config) => GatewayContext["auth"];
  registry: Registry;
  log: Logger;
}

/** What the data plane wires at start only for a profile that reads it (data-plane.ts): prompt-prefix hashing, the KV-events worker. */
const WIRED_AT_START = ["prefix-hashes", "kv-blocks"] as const;

function wired(scheduling: Config["scheduling"]): string[] {
  const reads = profileInputs(scheduling);
  return WIRED_AT_START.filter((input) => reads.has(input));
}

/** Refusals that depend on how this gateway was started, beyond the two documents. */
function startRefusals(plan: ReloadPlan, running: Config, next: Config, clustered: boolean): string[] {
  const out: string[] = [];
  if (clustered && plan.live.includes("tenants")) out.push("tenants (quotas are shared through Redis: restart the gateways)");
  const scheduling = plan.live.filter((k) => k.startsWith("scheduling."));
  if (scheduling.length > 0) {
    const before = wired(running.scheduling).join(", ") || "neither";
    const after = wired(next.scheduling).join(", ") || "neither";
    if (before !== after)
      out.push(`${scheduling.join(", ")} (of ${WIRED_AT_START.join(" and ")}, the profile would read ${after} instead of ${before}: that is wired at start)`);
  }
  return out;
}

function freeSlots(ctx: GatewayContext): number {
  ctx.endpoints.sweep();
  let free = 0;
  for (let row = 0; row < ctx.table.rows; row++) if (ctx.table.getInt(row, I.SLOT) === SLOT_FREE) free++;
  return free;
}

/**
 * One reload at a time: a second request waits for the one applying, then
 * reads the file itself. Applying is synchronous once the file is read, so
 * no request runs between two of its steps.
 */
export class ConfigReloader {
  #chain: Promise<unknown> = Promise.resolve();
  readonly #total: Counter<"result">;
  readonly #success: Gauge;
  readonly #timestamp: Gauge;

  constructor(private readonly deps: ReloadDeps) {
    this.#total = new Counter({ ...CONFIG_RELOAD.total, labelNames: ["result"], registers: [deps.registry] });
    for (const result of CONFIG_RELOAD_RESULTS) this.#total.labels({ result });
    this.#success = new Gauge({ ...CONFIG_RELOAD.lastSuccess, registers: [deps.registry] });
    this.#timestamp = new Gauge({ ...CONFIG_RELOAD.lastTimestamp, registers: [deps.registry] });
    this.#success.set(1);
    this.#timestamp.set(Date.now() / 1000);
  }

  /** Reload now (after any reload already under way); never throws. `trigger` names who asked, for the log. */
  reload(trigger: "signal" | "admin"): Promise<ReloadOutcome> {
    const run = this.#chain.then(() => this.#reloadNow(trigger));
    this.#chain = run.catch(() => {});
    return run;
  }

  #reloadNow(trigger: string): ReloadOutcome {
    const outcome = this.#attempt();
    this.#total.inc({ result: outcome.result });
    this.#success.set(outcome.result === "ok" ? 1 : 0);
    this.#timestamp.set(Date.now() / 1000);
    const { log } = this.deps;
    if (outcome.result === "ok") log.info({ trigger, changed: outcome.changed, endpoints: outcome.endpoints }, "configuration reloaded");
    else if (outcome.result === "invalid")
      log.error({ trigger, issues: outcome.issues }, `configuration reload failed, running configuration kept: ${outcome.message}`);
    else log.error({ trigger, keys: outcome.keys }, `configuration reload refused, running configuration kept: ${outcome.message}`);
    return outcome;
  }

  #attempt(): ReloadOutcome {
    let next: Config;
    try {
      next = this.deps.read();
    } catch (err) {
      if (err instanceof ConfigError) return { result: "invalid", message: err.message, issues: err.issues };
      return { result: "invalid", message: err instanceof Error ? err.message : String(err), issues: [] };
    }
    const ctx = this.deps.live.current;
    const running = ctx.config;
    const plan = planReload(running, next);
    const refused = [...plan.refused, ...startRefusals(plan, running, next, this.deps.quota === undefined)];
    if (refused.length > 0)
      return {
        result: "refused",
        message: `these keys cannot change while the gateway runs (restart it to change them): ${refused.join("; ")}`,
        keys: refused,
      };
    // serve refuses to start with nothing to route to; a reload must not leave a running gateway there either.
    if (next.endpoints.length === 0 && !fleetEnabled(next))
      return {
        result: "refused",
        message: "endpoints: the file leaves nothing to serve (no endpoints and no fleet); the running endpoints stay",
        keys: ["endpoints"],
      };
    const e = plan.endpoints;
    // A changed endpoint takes a new slot while its old one retires (its open streams hold it): count both before touching anything.
    const needed = e.added.length + e.changed.length;
    const free = freeSlots(ctx);
    if (needed > free)
      return {
        result: "refused",
        message: `endpoints: ${needed} new or changed endpoint(s) need a free slot and ${free} are free in max_endpoints (${running.maxEndpoints}); raising it needs a restart`,
        keys: ["max_endpoints"],
      };
    this.#apply(ctx, next, plan);
    return {
      result: "ok",
      changed: plan.live,
      endpoints: { added: e.added.map((x) => x.id), removed: [...e.removed], changed: e.changed.map((x) => x.id) },
    };
  }

  /** Everything below runs without an await: no request starts between two of these steps. */
  #apply(ctx: GatewayContext, next: Config, plan: ReloadPlan): void {
    const changed = new Set(plan.live.map((k) => k.split(".")[0]));
    if (changed.has("models") || changed.has("deadlines")) ctx.catalog.reconfigure(next);
    // Removal drains: the slot stops taking requests at once, and its open streams finish on it.
    for (const id of plan.endpoints.removed) ctx.endpoints.remove(id);
    for (const spec of [...plan.endpoints.changed, ...plan.endpoints.added]) ctx.endpoints.add(spec);
    if (changed.has("tenants")) this.deps.quota?.reconfigure(next.tenants);
    if (changed.has("scheduling")) ctx.admission.setScheduling(next.scheduling, this.#profile(next));
    const tenantNames = new Set(next.tenants.map((t) => t.name));
    const r = next.retry;
    const retryBudgetChanged = r.budgetRatio !== ctx.config.retry.budgetRatio || r.minPerS !== ctx.config.retry.minPerS;
    this.deps.live.swap({
      ...ctx,
      config: next,
      auth: changed.has("auth") ? this.deps.authFor(next) : ctx.auth,
      budget: retryBudgetChanged ? new RetryBudget(r.budgetRatio, r.minPerS) : ctx.budget,
      continuation: changed.has("continuation") ? new ContinuationPolicy(next.continuation, refusalsFileOf(next, ctx.log)) : ctx.continuation,
      routes: changed.has("endpoints") ? new RouteSupport(next.endpoints) : ctx.routes,
      tenantLabel: changed.has("tenants") ? (tenant) => (tenantNames.has(tenant) ? tenant : OTHER_TENANT) : ctx.tenantLabel,
    });
  }

  #profile(next: Config): SchedulingProfile {
    return new SchedulingProfile(next.scheduling, undefined, this.deps.tables.prefixIndex, this.deps.tables.kvIndex);
  }
}
