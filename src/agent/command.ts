/**
 * `llmgw agent` (the node agent: discovery, engine supervision, HTTP API) and
 * `llmgw agent inventory` (print what the scheduler would see of this node).
 */
import { homedir } from "node:os";
import { join } from "node:path";
import { boolFlag, type CommandSpec, numberFlag, type ParsedArgs, parseCommandArgs, parseListen, stringFlag, UsageError } from "../shared/flags.ts";
import { initLogger, logger, logListening } from "../shared/logger.ts";
import { canBind, findPortHolder, holderText, type PortHolder, listenRefusal as refusal } from "../shared/port-holder.ts";
import { shutdownSignal } from "../shared/signals.ts";
import { SIM_GPU_LEDGER_ENV } from "../shared/sim-gpu-ledger.ts";
import { createAgentHandler } from "./agent-server.ts";
import { AgentService } from "./agent-service.ts";
import { engineBinding } from "./engine-lifetime.ts";
import { DEFAULT_SYSFS_INFINIBAND } from "./fabric.ts";
import { FencingGuard } from "./fencing.ts";
import { DEFAULT_NVIDIA_SMI } from "./gpu-discovery.ts";
import { collectInventory, formatInventory } from "./inventory.ts";
import { loadOrCreateNodeKey } from "./node-key.ts";
import { startRegistration } from "./registration.ts";
import { REGISTRATION_OPTIONS, REGISTRATION_USAGE, registrationFromFlags } from "./registration-flags.ts";
import { DEFAULT_RESTART_POLICY } from "./replica-state.ts";
import { MAX_SIM_GPUS, SIM_H100, simUuidTag, writeSimNvidiaSmi } from "./sim-nvidia-smi.ts";
import { DEFAULT_STOP_GRACE_MS, Supervisor } from "./supervisor.ts";

export const DEFAULT_AGENT_LISTEN = "127.0.0.1:7070";
/** Bun.serve's 10 s idle default would cut a PUT that waits for the old engine to stop. */
const AGENT_IDLE_TIMEOUT_S = 120;

function defaultStateDir(): string {
  const base = process.env.XDG_STATE_HOME ?? join(homedir(), ".local", "state");
  return join(base, "llmgw", "agent");
}

const discoveryOptions = {
  "nvidia-smi": { type: "string" },
  "sysfs-root": { type: "string" },
} as const;

const AGENT_USAGE = `usage: llmgw agent [flags]
       llmgw agent inventory [--nvidia-smi PATH] [--sysfs-root DIR] [--json]

Runs the node agent: discovers GPUs and fabric, launches and supervises
engine replicas (vLLM, SGLang, sim-engine) and serves its HTTP API.

flags:
  --listen HOST:PORT        API listener (default ${DEFAULT_AGENT_LISTEN}; port 0 picks one)
  --token TOKEN             bearer token clients must present (or LLMGW_AGENT_TOKEN; required)
  --state-dir DIR           pid files, engine logs, the highest reconciler fencing
                            token seen and, with --register, the node key that holds
                            the node's name (default $XDG_STATE_HOME/llmgw/agent)
  --nvidia-smi PATH         nvidia-smi to run (default ${DEFAULT_NVIDIA_SMI}; missing = zero GPUs)
  --sim-gpus N              simulate N idle ${SIM_H100.name} GPUs (1-${MAX_SIM_GPUS}) with a stand-in
                            nvidia-smi written under --state-dir, for trying the fleet manager
                            without GPUs (place engine: sim models there); not with --nvidia-smi
  --sysfs-root DIR          InfiniBand sysfs root (default ${DEFAULT_SYSFS_INFINIBAND})
  --engine-host HOST        interface engines bind (default: the --listen host)
  --advertise-host HOST     host put in endpoint URLs (default: engine host)
  --vllm PATH               vllm executable (default vllm)
  --python PATH             python with sglang (default python3)
  --max-restarts N          crash restarts before a replica stays Failed (default ${DEFAULT_RESTART_POLICY.maxRestarts})
  --stop-grace-ms MS        SIGTERM → SIGKILL grace (default ${DEFAULT_STOP_GRACE_MS})
  --keep-engines-on-exit    engines outlive the agent (even kill -9) and the next agent adopts
                            them; a systemd unit then needs KillMode=process. Default: engines
                            stop with the agent (SIGTERM on exit, or from the kernel when the
                            agent dies: setpriv --pdeathsig)
${REGISTRATION_USAGE}

API (Authorization: Bearer TOKEN): GET /v1/inventory, GET /v1/state,
GET|PUT|DELETE /v1/replicas/{id}; GET /health needs no token.`;

const INVENTORY_USAGE = `usage: llmgw agent inventory [--nvidia-smi PATH] [--sysfs-root DIR] [--json]

Prints the GPUs (index, uuid, class, memory, compute capability, utilisation,
health) and fabric adapters the scheduler would see on this node.`;

const agentOptions = {
  ...discoveryOptions,
  listen: { type: "string" },
  token: { type: "string" },
  "state-dir": { type: "string" },
  "engine-host": { type: "string" },
  "advertise-host": { type: "string" },
  vllm: { type: "string" },
  python: { type: "string" },
  "max-restarts": { type: "string" },
  "stop-grace-ms": { type: "string" },
  "keep-engines-on-exit": { type: "boolean" },
  "sim-gpus": { type: "string" },
  ...REGISTRATION_OPTIONS,
} as const;

async function runInventory(args: ParsedArgs): Promise<number> {
  const inv = await collectInventory({
    nvidiaSmi: stringFlag(args, "nvidia-smi") ?? DEFAULT_NVIDIA_SMI,
    sysfsRoot: stringFlag(args, "sysfs-root") ?? DEFAULT_SYSFS_INFINIBAND,
    isOurs: () => false,
  });
  console.log(boolFlag(args, "json") ? JSON.stringify(inv, null, 2) : formatInventory(inv));
  return 0;
}

async function runAgent(args: ParsedArgs): Promise<number> {
  const listen = parseListen(stringFlag(args, "listen") ?? DEFAULT_AGENT_LISTEN, "--listen");
  const token = stringFlag(args, "token") ?? process.env.LLMGW_AGENT_TOKEN;
  if (!token) throw new UsageError("a bearer token is required: --token TOKEN or LLMGW_AGENT_TOKEN");
  const engineHost = stringFlag(args, "engine-host") ?? listen.host;
  const stateDir = stringFlag(args, "state-dir") ?? defaultStateDir();
  const maxRestarts = numberFlag(args, "max-restarts", DEFAULT_RESTART_POLICY.maxRestarts, { min: 0, integer: true });
  const stopGraceMs = numberFlag(args, "stop-grace-ms", DEFAULT_STOP_GRACE_MS, { min: 0, integer: true });
  const binding = engineBinding(boolFlag(args, "keep-engines-on-exit") ? "detached" : "bound", Bun.which("setpriv"), process.pid);
  const registration = registrationFromFlags(args, process.env);
  const nvidiaSmi = nvidiaSmiOf(args, stateDir);
  initLogger({ role: "agent" });
  // Before listening: an agent whose key file is unreadable must not start and register without it.
  const nodeKey = registration ? loadOrCreateNodeKey(stateDir) : undefined;
  if (binding.warning) logger().warn({ lifetime: binding.lifetime }, binding.warning);

  const portCheck = async (port: number) => ((await canBind(engineHost, port)) ? null : `port ${port} is ${holderText(findPortHolder(port))}`);
  const supervisor = new Supervisor({ stateDir, stopGraceMs, restart: { maxRestarts }, binding, portCheck });
  const service = new AgentService({
    nvidiaSmi,
    sysfsRoot: stringFlag(args, "sysfs-root") ?? DEFAULT_SYSFS_INFINIBAND,
    engineHost,
    advertiseHost: stringFlag(args, "advertise-host") ?? engineHost,
    bins: {
      vllm: stringFlag(args, "vllm") ?? "vllm",
      python: stringFlag(args, "python") ?? "python3",
      bun: process.execPath,
      cli: join(import.meta.dir, "..", "cli.ts"),
    },
    supervisor,
    portCheck,
  });
  // The port first: an agent that cannot serve must not adopt engines an earlier agent still runs.
  const handler = createAgentHandler(service, token, new FencingGuard(stateDir));
  let adopted: Promise<unknown> = Promise.resolve();
  const afterAdoption = async (req: Request): Promise<Response> => {
    await adopted; // a PUT must not race the adoption of the same replica id
    return handler(req);
  };
  const server = serveOrExplain(listen, afterAdoption);
  if (server === null) return 1;
  const adoption = supervisor.adopt();
  adopted = adoption;
  const inv = await service.inventory();
  const { adopted: adoptedIds, refused } = await adoption;
  logger().info(
    { gpus: inv.gpus.length, note: inv.nvidiaSmi.note, fabric: inv.fabric.island, stateDir, engines: binding.lifetime, adopted: adoptedIds, refused },
    "agent inventory",
  );
  const shownHost = listen.host === "0.0.0.0" ? "127.0.0.1" : listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  logListening(logger(), "agent", `http://${shownHost}:${server.port}`);
  const registering =
    registration && nodeKey !== undefined
      ? startRegistration({
          ...registration.resolve({ token, port: server.port ?? listen.port, host: stringFlag(args, "advertise-host") ?? engineHost, nodeKey }),
          log: logger(),
        })
      : undefined;

  // Handlers stay installed: a second signal must not kill the agent while it stops its engines.
  const signal = await shutdownSignal();
  const stopEngines = binding.lifetime === "bound";
  logger().info({ signal, stopEngines }, "agent stopping");
  registering?.stop();
  await server.stop(true);
  await supervisor.close({ stopEngines });
  return 0;
}

/** The nvidia-smi the agent runs: --nvidia-smi, a simulated one (--sim-gpus), or the default. */
function nvidiaSmiOf(args: ParsedArgs, stateDir: string): string {
  const given = stringFlag(args, "nvidia-smi");
  if (args.values["sim-gpus"] === undefined) return given ?? DEFAULT_NVIDIA_SMI;
  if (given !== undefined) throw new UsageError("--sim-gpus and --nvidia-smi exclude each other: the simulated GPUs answer as nvidia-smi");
  const count = numberFlag(args, "sim-gpus", 0, { min: 1, max: MAX_SIM_GPUS, integer: true });
  const ledgerDir = join(stateDir, "sim-gpus", "held");
  // The engines this agent starts inherit its environment: each sim-engine writes what it holds there, and memory.used reports it.
  process.env[SIM_GPU_LEDGER_ENV] = ledgerDir;
  return writeSimNvidiaSmi(join(stateDir, "sim-gpus"), { ...SIM_H100, count, uuidTag: simUuidTag(stateDir), ledgerDir });
}

/** The API listener; null when the port is taken, after saying who holds it (other errors are thrown). */
function serveOrExplain(listen: { host: string; port: number }, fetch: (req: Request) => Promise<Response>): ReturnType<typeof Bun.serve> | null {
  try {
    return Bun.serve({ hostname: listen.host, port: listen.port, idleTimeout: AGENT_IDLE_TIMEOUT_S, fetch });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    const message = listenRefusal(listen.port, findPortHolder(listen.port));
    logger().error({ port: listen.port }, message);
    console.error(`llmgw agent: ${message}`);
    return null;
  }
}

/** Why the agent cannot listen on `port`, and what to do about it. */
export function listenRefusal(port: number, holder: PortHolder | "unknown" | null): string {
  return refusal(port, holder, { command: "agent", unit: "llmgw-agent", flag: "--listen" });
}

async function dispatchAgent(argv: string[]): Promise<number> {
  const inventory = argv[0] === "inventory";
  const spec: CommandSpec = inventory
    ? {
        name: "agent inventory",
        summary: "print this node's inventory",
        usage: INVENTORY_USAGE,
        options: { ...discoveryOptions, json: { type: "boolean" } },
        run: runInventory,
      }
    : { name: "agent", summary: "run the node agent", usage: AGENT_USAGE, options: agentOptions, run: runAgent };
  const args = parseCommandArgs(spec, inventory ? argv.slice(1) : argv);
  if (args.values.help === true) {
    console.log(spec.usage);
    return 0;
  }
  return await spec.run(args);
}

export const agentCommand: CommandSpec = {
  name: "agent",
  summary: "run the node agent (GPU discovery, engine supervision)",
  usage: AGENT_USAGE,
  options: agentOptions,
  allowPositionals: true,
  run: runAgent,
  dispatch: dispatchAgent,
};
