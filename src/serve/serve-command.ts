/** `llmgw serve`: the gateway, from a config file or, for the simple case, from flags. */

import { DEFAULT_MAX_OPEN_STREAMS } from "../config/defaults.ts";
import { ConfigError, loadConfigFile } from "../config/load.ts";
import { effectiveConfigYaml } from "../config/print-config.ts";
import type { Config } from "../config/types.ts";
import { boolFlag, type CommandSpec, type ParsedArgs, stringFlag, stringListFlag, UsageError } from "../shared/flags.ts";
import { flushLogger, initLogger } from "../shared/logger.ts";
import { type OpenFilesLimit, openFilesAtStart, readOpenFilesLimit } from "../shared/open-files-limit.ts";
import { PortInUseError } from "../shared/port-holder.ts";
import { shutdownSignal } from "../shared/signals.ts";
import { describeState } from "../shared-state/state-backend.ts";
import { dataDirProblem, fleetEnabled } from "./fleet-wiring.ts";
import { startGateway } from "./start-gateway.ts";

const USAGE = `usage: llmgw serve [--config FILE] [flags]

Runs the gateway: the OpenAI-compatible API, the admin listener (metrics,
health, endpoint state, OpenAPI docs, the fleet's management API) and, if
set, a metrics-only listener. It routes to static endpoints (--upstream, or
endpoints: in the config), to the replicas its fleet manager places (nodes:
and fleet: in the config), or both.

flags:
  --config FILE            llmgw.yaml (see config/llmgw.example.yaml); also LLMGW_CONFIG
  --check-config           validate the configuration (and that a fleet's data_dir is
                           writable), print a summary, exit 0 (or 1)
  --print-config           print the effective configuration (file, flags, LLMGW_*
                           environment and defaults merged; secrets masked) as YAML, exit 0
  --upstream URL           an engine endpoint (repeatable); models are discovered from
                           its /v1/models. Adds to the config file's endpoints.
  --listen HOST:PORT       API listener (default 0.0.0.0:8080)
  --admin-listen HOST:PORT admin listener (default 127.0.0.1:9090)
  --metrics-listen HOST:PORT  metrics-only listener (default off)
  --log-level LEVEL        trace|debug|info|warn|error|fatal|silent

Environment: LLMGW_<KEY>=value overrides a top-level key, LLMGW_<A>__<B> a nested
one (e.g. LLMGW_HEALTH__POLL_INTERVAL_MS=500). LLMGW_ADMIN_TOKEN is the admin
token (fleet.admin_token), the same variable llmgw ctl reads.`;

/** The config file (or none), with flags applied on top, validated as one document. */
export function configFromArgs(args: ParsedArgs, env: Record<string, string | undefined> = process.env): Config {
  const path = stringFlag(args, "config") ?? env.LLMGW_CONFIG;
  return loadConfigFile(
    path,
    (raw, origins) => {
      const upstreams = stringListFlag(args, "upstream");
      if (upstreams.length > 0) {
        const existing = Array.isArray(raw.endpoints) ? (raw.endpoints as unknown[]) : [];
        raw.endpoints = [...existing, ...upstreams.map((url, i) => ({ id: `upstream-${existing.length + i + 1}`, url }))];
        upstreams.forEach((_, i) => origins.set(`endpoints[${existing.length + i}]`, "--upstream"));
      }
      for (const [flag, key] of [
        ["listen", "listen"],
        ["admin-listen", "admin_listen"],
        ["metrics-listen", "metrics_listen"],
        ["log-level", "log_level"],
      ] as const) {
        const v = stringFlag(args, flag);
        if (v !== undefined) {
          raw[key] = v;
          origins.set(key, `--${flag}`);
        }
      }
    },
    env,
  );
}

const NOTHING_TO_SERVE = "nothing to serve: give --upstream URL, or a --config file with endpoints or a fleet (nodes:, fleet.models, or a fleet token)";

/** `--print-config`: the merged document, with max_open_streams as this start would size it. */
function printConfig(config: Config, source: string | undefined, limit: OpenFilesLimit | undefined): string {
  const sized = openFilesAtStart(limit, config.maxOpenStreams, DEFAULT_MAX_OPEN_STREAMS).maxOpenStreams;
  const header = [
    `llmgw serve: the effective configuration (${source ?? "no config file"}, flags, LLMGW_* environment and defaults merged); secrets masked.`,
    ...(config.maxOpenStreams === undefined ? [`max_open_streams is not set: sized to ${sized} from the open-files limit at start.`] : []),
  ];
  return effectiveConfigYaml({ ...config.document, max_open_streams: sized }, header);
}

function fleetSummary(config: Config): string {
  if (!fleetEnabled(config)) return "fleet off";
  const f = config.fleet;
  const writes = config.admin.token ? "management writes on" : "management writes off (no admin.token or fleet.admin_token)";
  const registration = f.registrationToken ? "agent self-registration on" : "no self-registration";
  const where = config.state.backend === "redis" ? "state in Redis" : `state in ${config.dataDir}`;
  return `fleet on: ${config.nodes.length} configured node(s), ${f.models.length} desired model(s), ${writes}, ${registration}, ${where}`;
}

export const serveCommand: CommandSpec = {
  name: "serve",
  summary: "run the gateway",
  usage: USAGE,
  options: {
    config: { type: "string" },
    "check-config": { type: "boolean" },
    "print-config": { type: "boolean" },
    upstream: { type: "string", multiple: true },
    listen: { type: "string" },
    "admin-listen": { type: "string" },
    "metrics-listen": { type: "string" },
    "log-level": { type: "string" },
  },
  async run(args) {
    let config: Config;
    try {
      config = configFromArgs(args);
    } catch (err) {
      if (err instanceof ConfigError) {
        console.error(err.message);
        return 1;
      }
      throw err;
    }
    const fleet = fleetEnabled(config);
    const limit = readOpenFilesLimit();
    if (boolFlag(args, "print-config")) {
      process.stdout.write(printConfig(config, stringFlag(args, "config") ?? process.env.LLMGW_CONFIG, limit));
      return 0;
    }
    if (boolFlag(args, "check-config")) {
      // With shared state the fleet's store is Redis (reached at start), not a file in data_dir.
      const problem = fleet && config.state.backend === "sqlite" ? dataDirProblem(config.dataDir) : undefined;
      if (problem) {
        console.error(problem);
        return 1;
      }
      if (config.endpoints.length === 0 && !fleet) {
        console.error(NOTHING_TO_SERVE);
        return 1;
      }
      for (const w of config.warnings) console.error(`warning: ${w}`);
      console.log(
        `configuration OK: ${config.endpoints.length} endpoint(s), ${config.models.length} configured model(s); ${fleetSummary(config)}; ${describeState(config)}; ` +
          `listen ${config.listen.host}:${config.listen.port}, admin ${config.adminListen.host}:${config.adminListen.port}`,
      );
      return 0;
    }
    if (config.endpoints.length === 0 && !fleet) throw new UsageError(NOTHING_TO_SERVE);
    const log = initLogger({ role: "serve", level: config.logLevel });
    const files = openFilesAtStart(limit, config.maxOpenStreams, DEFAULT_MAX_OPEN_STREAMS);
    log[files.level](files.fields, files.msg);
    // SIGHUP reloads the configuration (systemd's ExecReload sends it); SIGINT and SIGTERM stop the gateway.
    // One that arrives while the gateway starts must not kill it (SIGHUP's default): the reload runs once it has started.
    let reloadOnHangup: (() => void) | undefined;
    let hangupWhileStarting = false;
    process.on("SIGHUP", () => {
      if (reloadOnHangup) reloadOnHangup();
      else hangupWhileStarting = true;
    });
    let gw: Awaited<ReturnType<typeof startGateway>>;
    try {
      // A reload reads the file again with the same flags and environment, through the same validation.
      gw = await startGateway(config, { log, reread: () => configFromArgs(args) });
    } catch (err) {
      // An unusable data_dir, or a port someone holds: the cause in one line, not a stack trace.
      if (err instanceof ConfigError) {
        log.fatal({ issues: err.issues }, "cannot start");
        await flushLogger();
        console.error(err.message);
        return 1;
      }
      if (err instanceof PortInUseError) {
        log.fatal({ port: err.port }, err.message);
        await flushLogger();
        console.error(`llmgw serve: ${err.message}`);
        return 1;
      }
      throw err;
    }
    const reload = gw.reload;
    if (reload) {
      reloadOnHangup = () => void reload("signal");
      if (hangupWhileStarting) reloadOnHangup();
    }
    const signal = await shutdownSignal((sig) => log.info({ signal: sig }, "shutting down"), ["SIGINT", "SIGTERM"]);
    await gw.stop();
    log.info({ signal }, "stopped");
    await flushLogger();
    return 0;
  },
};
