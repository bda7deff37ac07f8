/**
 * Operator changes through the management API: desired models, cordon,
 * uncordon, drain, and agent self-registration. Each is validated, written
 * to the store, then applied in memory, and asks for a reconcile; a change
 * refused with an error has changed nothing.
 */
import { fleetModelIssues, fleetModelPatchSchema, fleetModelSchema, fleetModelWire, toFleetModel } from "../config/fleet-schema.ts";
import type { FleetConfig, FleetModelSpec } from "../config/types.ts";
import type { AgentRegistration } from "../protocol/agent-messages.ts";
import { LlmgwError } from "../shared/errors.ts";
import type { Logger } from "../shared/logger.ts";
import type { FleetState } from "./fleet-state.ts";
import { keyMatches, keySha256 } from "./node-binding.ts";
import type { FleetStore } from "./store.ts";
import type { Cordon, DrainOp, NodeBinding, RegisteredNode, StoredModel } from "./types.ts";

interface OperationHooks {
  now: () => number;
  log: Logger;
  fleet: FleetConfig;
  requestTick: () => void;
  pushPollTargets: () => void;
  /** This gateway's environment: where a model's api_key_env must be set. */
  env: Readonly<Record<string, string | undefined>>;
}

function nameBound(reg: AgentRegistration, bound: NodeBinding): LlmgwError {
  const why = reg.node_key === undefined ? "this registration presents no node key" : "this registration presents another node key";
  return new LlmgwError(
    "NODE_NAME_BOUND",
    `node name '${reg.node}' is bound to the agent that registered it from ${bound.url}; ${why}. If the node moved to this agent (or its agent lost its state directory), an operator approves the re-bind: bin/llmgw ctl rebind ${reg.node}`,
    { param: "node" },
  );
}

function invalid(path: string, message: string): LlmgwError {
  return new LlmgwError("VALIDATION_FAILED", `${path}: ${message}`, { param: path });
}

export class FleetOperations {
  constructor(
    private readonly state: FleetState,
    private readonly store: FleetStore,
    private readonly hooks: OperationHooks,
  ) {}

  private node(name: string): void {
    if (!this.state.registry.get(name)) throw new LlmgwError("NOT_FOUND", `no node '${name}'`, { param: "node" });
  }

  /** Create or replace a desired model (already schema-checked); cross-field rules are checked here. A replaced model's pin is released. */
  async putModel(spec: FleetModelSpec, pin?: { pinnedAt: number }): Promise<StoredModel> {
    const issue = fleetModelIssues(fleetModelWire(spec))[0];
    if (issue) throw invalid(issue.path, issue.message);
    // This gateway sends the replicas' key: without it every replica would refuse it.
    if (spec.apiKeyEnv !== undefined && !this.hooks.env[spec.apiKeyEnv])
      throw invalid("api_key_env", `environment variable ${spec.apiKeyEnv} is not set or empty on this gateway`);
    const prev = this.state.models.get(spec.name);
    // A config model changed through the API stays a config model: a later edit of its config entry still wins.
    const stored: StoredModel = {
      spec,
      source: prev?.source ?? "api",
      configHash: prev?.configHash ?? null,
      updatedAt: this.hooks.now(),
      ...(pin && spec.autoscaling ? { pinnedAt: pin.pinnedAt } : {}),
    };
    await this.store.models.put(spec.name, stored);
    this.state.models.set(spec.name, stored);
    this.hooks.log.info({ model: spec.name, replicas: spec.replicas, ...(stored.pinnedAt !== undefined ? { pinned: true } : {}) }, "desired model set");
    this.hooks.requestTick();
    return stored;
  }

  /**
   * Change some fields of a desired model (`scale` is a patch of `replicas`).
   * An autoscaled model's count set this way is pinned until released; its
   * other fields keep the pin as it was.
   */
  async patchModel(name: string, patch: unknown): Promise<StoredModel> {
    const current = this.state.models.get(name);
    if (!current) throw new LlmgwError("NOT_FOUND", `no model named '${name}'`, { param: "model" });
    const parsedPatch = fleetModelPatchSchema.safeParse(patch);
    if (!parsedPatch.success) {
      const i = parsedPatch.error.issues[0];
      throw invalid(i?.path.join(".") || "(body)", i?.message ?? "invalid");
    }
    const merged = fleetModelSchema.safeParse({ ...fleetModelWire(current.spec), ...parsedPatch.data });
    if (!merged.success) {
      const i = merged.error.issues[0];
      throw invalid(i?.path.join(".") || "(body)", i?.message ?? "invalid");
    }
    const pinnedAt = "replicas" in parsedPatch.data ? this.hooks.now() : current.pinnedAt;
    return this.putModel(toFleetModel(merged.data), pinnedAt === undefined ? undefined : { pinnedAt });
  }

  /** The autoscaler's change of a model's count: nothing but `replicas` changes, and a pinned model is left as it is. */
  async autoscale(name: string, replicas: number): Promise<void> {
    const current = this.state.models.get(name);
    if (!current?.spec.autoscaling || current.pinnedAt !== undefined || current.spec.replicas === replicas) return;
    const stored: StoredModel = { ...current, spec: { ...current.spec, replicas }, updatedAt: this.hooks.now() };
    await this.store.models.put(name, stored);
    this.state.models.set(name, stored);
    this.hooks.requestTick();
  }

  /** Hand an autoscaled model's count back to the autoscaler (`ctl scale MODEL auto`). */
  async releasePin(name: string): Promise<StoredModel> {
    const current = this.state.models.get(name);
    if (!current) throw new LlmgwError("NOT_FOUND", `no model named '${name}'`, { param: "model" });
    if (!current.spec.autoscaling) throw new LlmgwError("CONFLICT", `model '${name}' has no autoscaling: its count is what operators set`, { param: "model" });
    if (current.pinnedAt === undefined) return current;
    const { pinnedAt: _released, ...rest } = current;
    const stored: StoredModel = { ...rest, updatedAt: this.hooks.now() };
    await this.store.models.put(name, stored);
    this.state.models.set(name, stored);
    this.hooks.log.info({ model: name }, "autoscaling pin released: the autoscaler sets the count again");
    return stored;
  }

  async deleteModel(name: string): Promise<void> {
    if (!this.state.models.has(name)) throw new LlmgwError("NOT_FOUND", `no model named '${name}'`, { param: "model" });
    await this.store.models.delete(name);
    this.state.models.delete(name);
    this.hooks.log.info({ model: name }, "desired model removed");
    this.hooks.requestTick();
  }

  async cordon(node: string, reason: string | null): Promise<Cordon> {
    this.node(node);
    const existing = this.state.cordons.get(node);
    if (existing) return existing;
    const c: Cordon = { node, reason, at: this.hooks.now() };
    await this.store.cordons.put(node, c);
    this.state.cordons.set(node, c);
    this.hooks.log.info({ node, reason }, "node cordoned");
    return c;
  }

  /** Allow placements again; a drain still running is cancelled (its replicas stay). */
  async uncordon(node: string): Promise<{ cancelledDrain: boolean }> {
    this.node(node);
    const op = this.state.drains.get(node);
    let cancelledDrain = false;
    if (op?.state === "running") {
      const cancelled: DrainOp = { ...op, state: "cancelled", finishedAt: this.hooks.now() };
      await this.store.drains.put(node, cancelled);
      this.state.drains.set(node, cancelled);
      for (const e of this.state.replicas.values()) {
        if (e.record.draining?.reason === "drain" && e.record.shards.some((s) => s.node === node)) {
          e.record = { ...e.record, draining: null };
          await this.store.replicas.put(e.record.id, e.record);
        }
      }
      cancelledDrain = true;
    }
    await this.store.cordons.delete(node);
    this.state.cordons.delete(node);
    this.hooks.log.info({ node, cancelledDrain }, "node uncordoned");
    this.hooks.requestTick();
    return { cancelledDrain };
  }

  /** Cordon and move every replica off (see reconcile.ts); a drain already running is returned as it is. */
  async drain(node: string, graceMs: number | undefined): Promise<DrainOp> {
    this.node(node);
    const running = this.state.drains.get(node);
    if (running?.state === "running") return running;
    await this.cordon(node, "drain");
    const op: DrainOp = { node, startedAt: this.hooks.now(), graceMs: graceMs ?? this.hooks.fleet.drainGraceMs, state: "running", finishedAt: null };
    await this.store.drains.put(node, op);
    this.state.drains.set(node, op);
    this.hooks.log.info({ node, graceMs: op.graceMs }, "drain started");
    this.hooks.requestTick();
    return op;
  }

  /**
   * An agent registering itself (or again). A configured node's name cannot
   * be taken, nor a name bound to another agent's node key
   * (node-binding.ts); a first registration with a key binds the name.
   */
  async register(reg: AgentRegistration): Promise<RegisteredNode> {
    if (this.state.registry.isConfigured(reg.node)) {
      throw new LlmgwError("CONFLICT", `node '${reg.node}' is configured under nodes: in the gateway's config; registration refused`, { param: "node" });
    }
    await this.checkBinding(reg);
    const node: RegisteredNode = { name: reg.node, url: reg.url.replace(/\/+$/, ""), token: reg.token, dcgmUrl: reg.dcgm_url, registeredAt: this.hooks.now() };
    const known = this.state.registry.get(reg.node);
    if (known && known.url === node.url && known.token === node.token && known.dcgmUrl === node.dcgmUrl)
      return { ...node, registeredAt: known.registeredAt ?? node.registeredAt };
    await this.store.nodes.put(node.name, node);
    if (this.state.registry.register(node, this.hooks.now())) this.hooks.pushPollTargets();
    this.hooks.log.info({ node: node.name, url: node.url }, "agent registered");
    this.hooks.requestTick();
    return node;
  }

  /** The name's binding: held by this registration's key, bound to it now, or refused. The store decides, so every gateway sharing it agrees. */
  private async checkBinding(reg: AgentRegistration): Promise<void> {
    const bound = await this.store.bindings.get(reg.node);
    if (bound) {
      if (keyMatches(bound, reg.node_key)) return;
      throw nameBound(reg, bound);
    }
    if (reg.node_key === undefined) {
      // An agent older than bindings: served as before, its name unbound (and so open to whoever registers it with a key).
      this.hooks.log.warn({ node: reg.node, url: reg.url }, "agent registered without a node key: its name is not bound to it (update the agent)");
      return;
    }
    const binding: NodeBinding = { node: reg.node, keySha256: keySha256(reg.node_key), url: reg.url.replace(/\/+$/, ""), boundAt: this.hooks.now() };
    if (await this.store.bindings.putIfAbsent(reg.node, binding)) {
      this.hooks.log.info({ node: reg.node, url: binding.url }, "node name bound to the registering agent's key");
      return;
    }
    // Another registration (maybe on another gateway) bound it a moment ago.
    const winner = await this.store.bindings.get(reg.node);
    if (winner && keyMatches(winner, reg.node_key)) return;
    throw nameBound(reg, winner ?? binding);
  }

  /**
   * An operator's approval to move a node's name to another agent: its
   * binding is dropped, and the next registration under the name binds it to
   * its own key. The node's current address stays until then.
   */
  async approveRebind(node: string): Promise<{ wasBound: boolean }> {
    if (this.state.registry.isConfigured(node)) {
      throw new LlmgwError(
        "CONFLICT",
        `node '${node}' is configured under nodes: in the gateway's config; its name is not registered, so there is nothing to re-bind`,
        { param: "node" },
      );
    }
    const bound = await this.store.bindings.get(node);
    if (!bound && !this.state.registry.get(node)) throw new LlmgwError("NOT_FOUND", `no node '${node}'`, { param: "node" });
    const wasBound = await this.store.bindings.delete(node);
    this.hooks.log.warn({ node, previousUrl: bound?.url ?? null }, "node re-bind approved: the next registration under this name binds it");
    return { wasBound };
  }
}
