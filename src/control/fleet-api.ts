/**
 * The management API as an Elysia plugin (mounted on the admin listener by
 * the gateway): nodes and GPUs, replicas, models desired vs serving,
 * placement explain, cordon / uncordon / drain, desired-model changes, and
 * agent self-registration. Reads need no token; writes need the admin token
 * and a token that is presented must be right (compared in constant time),
 * checked before the body is even validated, so a refused write changes
 * nothing. Registration takes the shared registration token instead. Every
 * error is OpenAI-shaped; a malformed change is a 422 naming the field.
 */
import { Elysia } from "elysia";
import { z } from "zod";
import { fleetModelPatchSchema, fleetModelSchema, toFleetModel } from "../config/fleet-schema.ts";
import {
  AGENT_REGISTRATION_PATH,
  type AgentRegistrationResponse,
  agentRegistrationResponseSchema,
  agentRegistrationSchema,
} from "../protocol/agent-messages.ts";
import { bearerToken, tokenMatches } from "../shared/bearer.ts";
import { LlmgwError } from "../shared/errors.ts";
import { managementApiErrors } from "../shared/management-api-errors.ts";
import { quotedName } from "../shared/model-name.ts";
import { autoscaleStatus, drainProgress, modelsStatus, nodesStatus, placementStatus, replicasStatus } from "./api-views.ts";
import * as S from "./fleet-api-schemas.ts";
import type { FleetManager } from "./fleet-manager.ts";

interface FleetApiOptions {
  /** Bearer token for writes; undefined: every write is refused. */
  adminToken: string | undefined;
  /** Shared token agents register with; undefined: registration is refused. */
  registrationToken: string | undefined;
  /** Told to registering agents: register again within this long. */
  registrationIntervalMs: number;
  now?: () => number;
}

function checkToken(request: Request, path: string, opts: FleetApiOptions): void {
  const header = request.headers.get("authorization");
  if (path === AGENT_REGISTRATION_PATH) {
    if (!opts.registrationToken) throw new LlmgwError("UNAUTHORIZED", "agent self-registration is off (set fleet.registration_token)");
    if (!tokenMatches(header, opts.registrationToken)) throw new LlmgwError("UNAUTHORIZED", "missing or wrong registration token");
    return;
  }
  const presented = bearerToken(header) !== null;
  const write = request.method !== "GET" && request.method !== "HEAD";
  if (!presented && !write) return;
  if (!opts.adminToken)
    throw new LlmgwError(
      "UNAUTHORIZED",
      "management writes are off: no admin token is configured (fleet.admin_token, or LLMGW_ADMIN_TOKEN in the gateway's environment)",
    );
  if (!tokenMatches(header, opts.adminToken))
    throw new LlmgwError("UNAUTHORIZED", presented ? "wrong admin token" : "this change needs the admin token (Authorization: Bearer …)");
}

const tags = ["fleet"];
const writeNote = "Needs `Authorization: Bearer <admin token>`.";

export function fleetApi(manager: FleetManager, opts: FleetApiOptions) {
  const now = opts.now ?? Date.now;
  const node = (name: string) => {
    const n = nodesStatus(manager, now()).find((x) => x.name === name);
    if (!n) throw new LlmgwError("NOT_FOUND", `no node ${quotedName(name)}`, { param: "node" });
    return n;
  };
  const drainOf = (name: string) => {
    node(name);
    const op = manager.state.drains.get(name);
    if (!op) throw new LlmgwError("NOT_FOUND", `node ${quotedName(name)} was never drained`, { param: "node" });
    return drainProgress(manager, op, now());
  };
  const model = (name: string) => {
    const m = modelsStatus(manager, now()).find((x) => x.name === name);
    if (!m) throw new LlmgwError("NOT_FOUND", `no model named ${quotedName(name)}`, { param: "model" });
    return m;
  };

  return new Elysia({ name: "llmgw-fleet-api", prefix: S.FLEET_API_PREFIX })
    .onError(managementApiErrors({ api: "management API" }))
    .onTransform(function fleetApiAuth({ request, path }) {
      checkToken(request, path, opts);
    })
    .get("/nodes", () => ({ nodes: nodesStatus(manager, now()) }), {
      response: z.object({ nodes: z.array(S.nodeStatusSchema) }),
      detail: { tags, summary: "Nodes: state, cordon, drain, fabric, and each GPU with its faults" },
    })
    .get("/nodes/:node", ({ params }) => node(params.node), {
      response: { 200: S.nodeStatusSchema, 404: S.errorSchema },
      detail: { tags, summary: "One node" },
    })
    .get("/gpus", () => ({ gpus: nodesStatus(manager, now()).flatMap((n) => n.gpus) }), {
      response: z.object({ gpus: z.array(S.gpuStatusSchema) }),
      detail: { tags, summary: "Every GPU of every node, with why it is kept out of placement" },
    })
    .get("/replicas", () => replicasStatus(manager, now()), {
      response: z.object({ replicas: z.array(S.replicaStatusSchema), failed: z.array(S.failedReplicaSchema) }),
      detail: { tags, summary: "Replicas with per-shard state and errors, and recently failed ones with their log tails" },
    })
    .get("/models", () => ({ models: modelsStatus(manager, now()) }), {
      response: z.object({ models: z.array(S.modelStatusSchema) }),
      detail: { tags, summary: "Desired models: desired vs active, ready and serving replicas" },
    })
    .get("/autoscale", () => ({ models: autoscaleStatus(manager) }), {
      response: z.object({ models: z.array(S.autoscaleStatusSchema) }),
      detail: { tags, summary: "Autoscaled models: current, desired, the policy, the measured start-up and the last decisions with their reasons" },
    })
    .delete(
      "/models/:model/pin",
      async ({ params }) => {
        await manager.ops.releasePin(params.model);
        return model(params.model);
      },
      {
        response: { 200: S.modelStatusSchema, 401: S.errorSchema, 404: S.errorSchema, 409: S.errorSchema },
        detail: {
          tags,
          summary: "Hand an autoscaled model's count back to the autoscaler (a PATCH of replicas pins it)",
          description: writeNote,
        },
      },
    )
    .get(
      "/models/:model/placement",
      ({ params }) => {
        const p = placementStatus(manager, params.model);
        if (!p) throw new LlmgwError("NOT_FOUND", `no model named ${quotedName(params.model)}`, { param: "model" });
        return p;
      },
      {
        response: { 200: S.placementSchema, 404: S.errorSchema },
        detail: { tags, summary: "Explain placement: every candidate (node × GPU set), chosen or rejected with its reasons" },
      },
    )
    .put(
      "/models/:model",
      async ({ params, body, set }) => {
        if (body.name !== params.model)
          throw new LlmgwError("VALIDATION_FAILED", `name: expected ${quotedName(params.model)} (the model in the path)`, { param: "name" });
        const existed = manager.state.models.has(params.model);
        await manager.ops.putModel(toFleetModel(body));
        set.status = existed ? 200 : 201;
        return model(params.model);
      },
      {
        body: fleetModelSchema,
        response: { 200: S.modelStatusSchema, 201: S.modelStatusSchema, 401: S.errorSchema, 422: S.errorSchema },
        detail: { tags, summary: "Create or replace a desired model", description: writeNote },
      },
    )
    .patch(
      "/models/:model",
      async ({ params, body }) => {
        await manager.ops.patchModel(params.model, body);
        return model(params.model);
      },
      {
        body: fleetModelPatchSchema,
        response: { 200: S.modelStatusSchema, 401: S.errorSchema, 404: S.errorSchema, 422: S.errorSchema },
        detail: { tags, summary: 'Change fields of a desired model (scale: {"replicas": N})', description: writeNote },
      },
    )
    .delete(
      "/models/:model",
      async ({ params }) => {
        await manager.ops.deleteModel(params.model);
        return { model: params.model, deleted: true as const };
      },
      {
        response: { 200: z.object({ model: z.string(), deleted: z.literal(true) }), 401: S.errorSchema, 404: S.errorSchema },
        detail: { tags, summary: "Remove a desired model (its replicas drain away)", description: writeNote },
      },
    )
    .post(
      "/nodes/:node/cordon",
      async ({ params, body }) => {
        await manager.ops.cordon(params.node, body?.reason ?? null);
        return node(params.node);
      },
      {
        body: S.cordonBodySchema,
        response: { 200: S.nodeStatusSchema, 401: S.errorSchema, 404: S.errorSchema },
        detail: { tags, summary: "Cordon: no new replicas on the node (running ones stay)", description: writeNote },
      },
    )
    .post(
      "/nodes/:node/uncordon",
      async ({ params }) => {
        const { cancelledDrain } = await manager.ops.uncordon(params.node);
        return { node: node(params.node), cancelled_drain: cancelledDrain };
      },
      {
        response: { 200: z.object({ node: S.nodeStatusSchema, cancelled_drain: z.boolean() }), 401: S.errorSchema, 404: S.errorSchema },
        detail: { tags, summary: "Uncordon: placements allowed again; a running drain is cancelled", description: writeNote },
      },
    )
    .post(
      "/nodes/:node/drain",
      async ({ params, body, set }) => {
        await manager.ops.drain(params.node, body?.grace_ms);
        set.status = 202;
        return drainOf(params.node);
      },
      {
        body: S.drainBodySchema,
        response: { 202: S.drainProgressSchema, 401: S.errorSchema, 404: S.errorSchema },
        detail: { tags, summary: "Drain: cordon, then move every replica off (replacement first, bounded by a grace period)", description: writeNote },
      },
    )
    .post(
      "/nodes/:node/rebind",
      async ({ params }) => {
        const { wasBound } = await manager.ops.approveRebind(params.node);
        return { node: params.node, was_bound: wasBound };
      },
      {
        response: { 200: S.rebindSchema, 401: S.errorSchema, 404: S.errorSchema, 409: S.errorSchema },
        detail: {
          tags,
          summary:
            "Approve moving a self-registered node's name to another agent: its binding to the agent's node key is dropped, and the next registration under the name binds it anew",
          description: writeNote,
        },
      },
    )
    .get("/nodes/:node/drain", ({ params }) => drainOf(params.node), {
      response: { 200: S.drainProgressSchema, 404: S.errorSchema },
      detail: { tags, summary: "Progress of the node's latest drain, and what it waits for" },
    })
    .post(
      "/register",
      async ({ body }): Promise<AgentRegistrationResponse> => {
        const n = await manager.ops.register(body);
        return { node: n.name, accepted: true, reregister_interval_ms: opts.registrationIntervalMs };
      },
      {
        body: agentRegistrationSchema,
        response: { 200: agentRegistrationResponseSchema, 401: S.errorSchema, 409: S.errorSchema, 422: S.errorSchema },
        detail: {
          tags,
          summary: "An agent registers itself (Authorization: Bearer <registration token>)",
          description:
            "The first registration with a `node_key` binds the node's name to that key; a later one under the name without the same key is 409 NODE_NAME_BOUND until an operator approves a re-bind.",
        },
      },
    );
}
