/**
 * `llmgw demo` (what `npm start` runs): three sim-engines on loopback and a
 * gateway in front of them on config/demo.yaml, ready for traffic, with a
 * curl line and an openai SDK snippet; with --fleet, the fleet manager over
 * two node agents on simulated GPUs instead (demo-fleet.ts). Ctrl-C stops
 * all of it.
 */
import { join } from "node:path";
import { ConfigError, loadConfigFile } from "../config/load.ts";
import { boolFlag, type CommandSpec, numberFlag, type ParsedArgs, stringFlag, UsageError } from "../shared/flags.ts";
import { type LlmgwChild, REPO_ROOT, spawnLlmgw } from "../shared/llmgw-child.ts";
import { flushLogger, initLogger } from "../shared/logger.ts";
import { PortInUseError } from "../shared/port-holder.ts";
import { shutdownSignal } from "../shared/signals.ts";
import { DEMO_FLEET_NODES, DEMO_SIM_GPUS, runFleetDemo } from "./demo-fleet.ts";
import { applyListenFlags, metricsLine } from "./demo-listen-flags.ts";
import { startGateway } from "./start-gateway.ts";

const DEMO_CONFIG = join(REPO_ROOT, "config", "demo.yaml");
const DEMO_MODEL = "sim-llama-8b";

const USAGE = `usage: llmgw demo [--engines N] [--listen HOST:PORT] [--admin-listen HOST:PORT] [--metrics-listen HOST:PORT]
       llmgw demo --fleet [--listen HOST:PORT] [--admin-listen HOST:PORT] [--metrics-listen HOST:PORT]

Starts three sim-engines (simulated vLLM servers on loopback, each with one
simulated GPU) and a gateway in front of them, using config/demo.yaml.
With --fleet: a gateway running the fleet manager (config/demo-fleet.yaml)
and ${DEMO_FLEET_NODES.length} node agents on ${DEMO_SIM_GPUS} simulated GPUs each; replicas are placed on
them, and the banner prints the dashboard and the llmgw ctl lines to try.
Ctrl-C stops everything.

flags:
  --engines N              number of sim-engines (default 3; not with --fleet)
  --fleet                  the fleet manager over node agents on simulated GPUs
  --listen HOST:PORT       gateway API listener (default 127.0.0.1:8080)
  --admin-listen HOST:PORT admin listener (default 127.0.0.1:9090)
  --metrics-listen HOST:PORT
                           metrics-only listener (/metrics, /healthz, /readyz; default off):
                           127.0.0.1:9190 is the target deploy/monitoring/prometheus.yml scrapes`;

function listenFlags(args: ParsedArgs) {
  return { listen: stringFlag(args, "listen"), adminListen: stringFlag(args, "admin-listen"), metricsListen: stringFlag(args, "metrics-listen") };
}

function banner(api: string, admin: string, metrics: string | undefined, engines: string[]): string {
  return `
llmgw demo is running: a gateway in front of ${engines.length} simulated vLLM engines.

  OpenAI API     ${api}/v1        (model "${DEMO_MODEL}", alias "llama")
  Dashboard      ${admin}/dashboard
  Admin          ${admin}/admin/v1/endpoints   ${admin}/metrics   ${admin}/openapi${metricsLine(metrics)}
  Sim-engines    ${engines.join("  ")}

Try it:

  curl -N ${api}/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"${DEMO_MODEL}","stream":true,"messages":[{"role":"user","content":"Hello!"}]}'

With the openai SDK (npm install openai):

  import OpenAI from "openai";
  const client = new OpenAI({ baseURL: "${api}/v1", apiKey: "unused" });
  const stream = await client.chat.completions.create({
    model: "${DEMO_MODEL}", stream: true, messages: [{ role: "user", content: "Hello!" }],
  });
  for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");

Press Ctrl-C to stop.
`;
}

export const demoCommand: CommandSpec = {
  name: "demo",
  summary: "gateway plus three sim-engines on the embedded config (--fleet: a fleet on simulated GPUs)",
  usage: USAGE,
  options: {
    engines: { type: "string" },
    fleet: { type: "boolean" },
    listen: { type: "string" },
    "admin-listen": { type: "string" },
    "metrics-listen": { type: "string" },
  },
  async run(args) {
    try {
      return await (boolFlag(args, "fleet") ? fleetDemo(args) : plainDemo(args));
    } catch (err) {
      // A taken port or a bad --listen: the cause, not a stack trace.
      if (err instanceof PortInUseError) console.error(`llmgw demo: ${err.message}`);
      else if (err instanceof ConfigError) console.error(err.message);
      else throw err;
      await flushLogger();
      return 1;
    }
  },
};

async function fleetDemo(args: ParsedArgs): Promise<number> {
  if (args.values.engines !== undefined) throw new UsageError("--engines applies to the plain demo; --fleet places replicas on node agents instead");
  const log = initLogger({ role: "demo", level: "warn" });
  const code = await runFleetDemo({ ...listenFlags(args), log });
  await flushLogger();
  return code;
}

async function plainDemo(args: ParsedArgs): Promise<number> {
  const n = numberFlag(args, "engines", 3, { min: 1, max: 16, integer: true });
  const log = initLogger({ role: "demo", level: "warn" });
  const engines: LlmgwChild[] = [];
  const stopEngines = () => Promise.all(engines.map((e) => e.stop()));
  try {
    for (let i = 0; i < n; i++) {
      engines.push(
        await spawnLlmgw(["sim-engine", "--port", "0", "--model", DEMO_MODEL, "--gpus", "1", "--dcgm-port", "0"], {
          // "info": the listening lines carry the ports; output is not echoed.
          waitFor: 2,
          env: { LLMGW_LOG_LEVEL: "info" },
        }),
      );
    }
  } catch (err) {
    await stopEngines();
    throw err;
  }
  let gw: Awaited<ReturnType<typeof startGateway>>;
  try {
    const config = loadConfigFile(DEMO_CONFIG, (raw, origins) => {
      raw.endpoints = engines.map((e, i) => ({ id: `sim-${i + 1}`, url: e.urls.api, dcgm_url: e.urls.dcgm ? `${e.urls.dcgm}/metrics` : undefined }));
      applyListenFlags(raw, origins, listenFlags(args));
    });
    gw = await startGateway(config, { log });
  } catch (err) {
    await stopEngines();
    throw err;
  }
  console.log(
    banner(
      gw.urls.api,
      gw.urls.admin,
      gw.urls.metrics,
      engines.map((e) => e.urls.api ?? e.url),
    ),
  );
  await shutdownSignal();
  console.log("\nstopping the gateway and the sim-engines…");
  await gw.stop();
  await stopEngines();
  await flushLogger();
  return 0;
}
