/** `llmgw ctl`: operator CLI against a gateway's admin listener: the management API (nodes, replicas, models, placement, scale, cordon, drain, rebind), the keys API and a config reload. */
import { z } from "zod";
import { RELOAD_PATH, reloadAppliedSchema } from "../admin/reload-route.ts";
import * as S from "../control/fleet-api-schemas.ts";
import { boolFlag, type CommandSpec, numberFlag, type ParsedArgs, parseCommandArgs, stringFlag, UsageError } from "../shared/flags.ts";
import { useColour } from "../shared/text-table.ts";
import { CTL_EXIT, CtlClient, CtlError } from "./client.ts";
import { KEYS_OPTIONS, KEYS_USAGE, runKeys } from "./keys-command.ts";
import { formatAutoscale, formatDrain, formatModels, formatNodes, formatPlacement, formatReplicas } from "./views.ts";

export const DEFAULT_CTL_GATEWAY = "http://127.0.0.1:9090";
const DRAIN_POLL_MS = 1_000;

const USAGE = `usage: llmgw ctl [--gateway URL] [--token TOKEN] [--json] <command> [args]

Operator CLI against a gateway's admin listener (its management API).

commands:
  nodes                       nodes, their state, and each unhealthy GPU with the reason it is excluded
  replicas                    replicas with their shards, state and errors; recently failed ones with log tails
  models                      desired models: desired vs active, ready and serving replicas
  explain-placement MODEL     every candidate (node × GPU set) and why it was chosen or rejected
  scale MODEL N|auto          set a model's desired replica count; an autoscaled model's count is
                              then pinned until \`scale MODEL auto\` hands it back to the autoscaler
  autoscale                   autoscaled models: current, desired, the policy, the measured
                              start-up and the last decisions with their reasons and inputs
  cordon NODE [--reason TEXT] no new replicas on NODE (running ones stay)
  uncordon NODE               allow placements again (cancels a drain still running)
  drain NODE [--grace-ms MS] [--no-wait]
                              cordon NODE and move its replicas elsewhere; waits and shows progress
  rebind NODE                 let the next agent that registers as NODE take the name (the node
                              moved, or its agent lost its state directory and so its node key)
  reload                      re-read the gateway's config file and apply what can change live (as
                              SIGHUP does); an invalid file, or a change that needs a restart, is
                              refused whole and the running configuration stays (exit 7)
${KEYS_USAGE}

flags:
  --gateway URL    admin listener (default $LLMGW_GATEWAY or ${DEFAULT_CTL_GATEWAY})
  --token TOKEN    admin token for changes (default $LLMGW_ADMIN_TOKEN, the variable
                   llmgw serve reads for fleet.admin_token)
  --json           print the API's JSON answer instead of a table

exit codes: 0 ok, 1 other error, 2 usage, 4 gateway unreachable, 5 token refused,
6 no such node, model or key (or a gateway that runs no fleet manager), 7 change refused (invalid,
or a config key the keys API cannot change).`;

const OPTIONS = {
  gateway: { type: "string" },
  token: { type: "string" },
  json: { type: "boolean" },
  reason: { type: "string" },
  "grace-ms": { type: "string" },
  "no-wait": { type: "boolean" },
  ...KEYS_OPTIONS,
} as const;

/** Where ctl writes; tests capture it. */
export interface CtlIo {
  out(text: string): void;
  err(text: string): void;
  isTty: boolean;
  env: Record<string, string | undefined>;
}

const ARITY: Record<string, { args: string[]; flags: string[] }> = {
  nodes: { args: [], flags: [] },
  replicas: { args: [], flags: [] },
  models: { args: [], flags: [] },
  "explain-placement": { args: ["MODEL"], flags: [] },
  scale: { args: ["MODEL", "N"], flags: [] },
  autoscale: { args: [], flags: [] },
  cordon: { args: ["NODE"], flags: ["reason"] },
  uncordon: { args: ["NODE"], flags: [] },
  drain: { args: ["NODE"], flags: ["grace-ms", "no-wait"] },
  rebind: { args: ["NODE"], flags: [] },
  reload: { args: [], flags: [] },
  /** Its sub-commands check their own arguments and flags (keys-command.ts). */
  keys: { args: [], flags: Object.keys(KEYS_OPTIONS) },
};

function checkArgs(args: ParsedArgs): { command: string; params: string[] } {
  const [command, ...params] = args.positionals;
  if (command === undefined) throw new UsageError("a command is required");
  const spec = ARITY[command];
  if (!spec) throw new UsageError(`unknown command '${command}'`);
  if (command !== "keys" && params.length !== spec.args.length)
    throw new UsageError(`${command} takes ${spec.args.length === 0 ? "no arguments" : spec.args.join(" ")}`);
  for (const f of ["reason", "grace-ms", "no-wait", ...Object.keys(KEYS_OPTIONS)])
    if (args.values[f] !== undefined && !spec.flags.includes(f)) throw new UsageError(`--${f} does not apply to ${command}`);
  return { command, params };
}

const enc = encodeURIComponent;

function formatReload(r: z.infer<typeof reloadAppliedSchema>): string {
  if (r.changed.length === 0) return "configuration reloaded: nothing changed";
  const e = r.endpoints;
  const parts = [
    ...(e.added.length ? [`added ${e.added.join(", ")}`] : []),
    ...(e.removed.length ? [`draining ${e.removed.join(", ")}`] : []),
    ...(e.changed.length ? [`changed ${e.changed.join(", ")}`] : []),
  ];
  return `configuration reloaded: ${r.changed.join(", ")} changed${parts.length ? ` (endpoints: ${parts.join("; ")})` : ""}`;
}

async function drainAndWait(client: CtlClient, node: string, args: ParsedArgs, io: CtlIo, json: boolean): Promise<number> {
  const graceMs = args.values["grace-ms"] === undefined ? undefined : numberFlag(args, "grace-ms", 0, { min: 0, max: 86_400_000, integer: true });
  let progress = await client.call("POST", `/nodes/${enc(node)}/drain`, S.drainProgressSchema, graceMs === undefined ? {} : { grace_ms: graceMs });
  if (boolFlag(args, "no-wait")) {
    io.out(json ? JSON.stringify(progress, null, 2) : formatDrain(progress));
    return CTL_EXIT.ok;
  }
  let shown = "";
  while (progress.state === "running") {
    const text = formatDrain(progress);
    // Only what changed: a grace countdown alone is not news every second.
    const key = text.replace(/grace period \d+ s left/g, "").replace(/\d+ s left/g, "");
    if (!json && key !== shown) io.out(text);
    shown = key;
    await Bun.sleep(DRAIN_POLL_MS);
    progress = await client.call("GET", `/nodes/${enc(node)}/drain`, S.drainProgressSchema);
  }
  io.out(json ? JSON.stringify(progress, null, 2) : formatDrain(progress));
  return progress.state === "done" ? CTL_EXIT.ok : CTL_EXIT.error;
}

async function run(args: ParsedArgs, io: CtlIo): Promise<number> {
  const { command, params } = checkArgs(args);
  // The gateway's own long form (LLMGW_FLEET__ADMIN_TOKEN) works too: on the gateway's host, one exported variable serves both.
  const token = stringFlag(args, "token") ?? io.env.LLMGW_ADMIN_TOKEN ?? io.env.LLMGW_FLEET__ADMIN_TOKEN;
  const client = new CtlClient(stringFlag(args, "gateway") ?? io.env.LLMGW_GATEWAY ?? DEFAULT_CTL_GATEWAY, token);
  const json = boolFlag(args, "json");
  const colour = useColour(io.isTty, io.env);
  const show = (value: unknown, text: () => string) => io.out(json ? JSON.stringify(value, null, 2) : text());
  const [a = "", b = ""] = params;
  switch (command) {
    case "nodes": {
      const r = await client.call("GET", "/nodes", z.object({ nodes: z.array(S.nodeStatusSchema) }));
      show(r, () => formatNodes(r.nodes, colour));
      return CTL_EXIT.ok;
    }
    case "replicas": {
      const r = await client.call("GET", "/replicas", z.object({ replicas: z.array(S.replicaStatusSchema), failed: z.array(S.failedReplicaSchema) }));
      show(r, () => formatReplicas(r.replicas, r.failed, colour));
      return CTL_EXIT.ok;
    }
    case "models": {
      const r = await client.call("GET", "/models", z.object({ models: z.array(S.modelStatusSchema) }));
      show(r, () => formatModels(r.models, colour));
      return CTL_EXIT.ok;
    }
    case "explain-placement": {
      const r = await client.call("GET", `/models/${enc(a)}/placement`, S.placementSchema);
      show(r, () => formatPlacement(r, colour));
      return CTL_EXIT.ok;
    }
    case "scale": {
      if (b === "auto") {
        const r = await client.call("DELETE", `/models/${enc(a)}/pin`, S.modelStatusSchema);
        show(r, () => `${r.name}: the autoscaler sets the count again (desired ${r.desired} now, ${r.serving} serving)`);
        return CTL_EXIT.ok;
      }
      if (!/^\d+$/.test(b)) throw new UsageError(`scale: N must be a whole number or auto, got '${b}'`);
      const r = await client.call("PATCH", `/models/${enc(a)}`, S.modelStatusSchema, { replicas: Number(b) });
      const pin = r.pinned ? `; pinned: the autoscaler leaves it until \`llmgw ctl scale ${r.name} auto\`` : "";
      show(r, () => `${r.name}: desired ${r.desired} replica(s) (${r.serving} serving now)${pin}`);
      return CTL_EXIT.ok;
    }
    case "autoscale": {
      const r = await client.call("GET", "/autoscale", z.object({ models: z.array(S.autoscaleStatusSchema) }));
      show(r, () => formatAutoscale(r.models, colour));
      return CTL_EXIT.ok;
    }
    case "cordon": {
      const reason = stringFlag(args, "reason");
      const r = await client.call("POST", `/nodes/${enc(a)}/cordon`, S.nodeStatusSchema, reason === undefined ? {} : { reason });
      show(r, () => `${r.name} cordoned: no new replicas (${r.replicas.length} running stay)`);
      return CTL_EXIT.ok;
    }
    case "uncordon": {
      const r = await client.call("POST", `/nodes/${enc(a)}/uncordon`, z.object({ node: S.nodeStatusSchema, cancelled_drain: z.boolean() }));
      show(r, () => `${r.node.name} uncordoned${r.cancelled_drain ? " (the drain in progress was cancelled)" : ""}`);
      return CTL_EXIT.ok;
    }
    case "drain":
      return drainAndWait(client, a, args, io, json);
    case "keys":
      return runKeys(params, args, { gateway: stringFlag(args, "gateway") ?? io.env.LLMGW_GATEWAY ?? DEFAULT_CTL_GATEWAY, token, json, colour, out: io.out });
    case "rebind": {
      const r = await client.call("POST", `/nodes/${enc(a)}/rebind`, S.rebindSchema);
      show(r, () => `${r.node}: re-bind approved; the next agent that registers as ${r.node} binds the name to its own node key`);
      return CTL_EXIT.ok;
    }
    case "reload": {
      const r = await client.callAt("POST", RELOAD_PATH, reloadAppliedSchema);
      show(r, () => formatReload(r));
      return CTL_EXIT.ok;
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

/** `llmgw ctl …` with its output going to `io`; returns the exit code. */
export async function runCtl(argv: string[], io: CtlIo): Promise<number> {
  const spec = ctlCommand;
  try {
    const args = parseCommandArgs(spec, argv);
    if (args.values.help === true) {
      io.out(USAGE);
      return CTL_EXIT.ok;
    }
    return await run(args, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`llmgw ctl: ${err.message}\n\n${USAGE}`);
      return CTL_EXIT.usage;
    }
    if (err instanceof CtlError) {
      io.err(`llmgw ctl: ${err.message}`);
      return err.exitCode;
    }
    throw err;
  }
}

const processIo: CtlIo = {
  out: (text) => console.log(text),
  err: (text) => console.error(text),
  isTty: process.stdout.isTTY === true,
  env: process.env,
};

export const ctlCommand: CommandSpec = {
  name: "ctl",
  summary: "operator CLI against a gateway's admin listener",
  usage: USAGE,
  options: OPTIONS,
  allowPositionals: true,
  run: (args) => run(args, processIo),
  dispatch: (argv) => runCtl(argv, processIo),
};
