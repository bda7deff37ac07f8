#!/usr/bin/env bun
/**
 * One entry for every role: `llmgw <command> [flags]`. Re-executes itself (exec,
 * same pid) when the process started without the Bun environment llmgw needs
 * (see src/shared/process-env.ts), so `bun src/cli.ts …` behaves like `llmgw …`,
 * and stops with the process that started it when LLMGW_PARENT_PID says so.
 */
import { type CommandSpec, parseCommandArgs, UsageError } from "./shared/flags.ts";
import { flushLogger } from "./shared/logger.ts";
import { bindToParent } from "./shared/parent-binding.ts";
import { childEnv, execSelfWithBunEnv, missingBunEnv } from "./shared/process-env.ts";

type Loader = () => Promise<CommandSpec>;

const COMMANDS: Record<string, { summary: string; load: Loader }> = {
  serve: { summary: "run the gateway (OpenAI API, admin and metrics listeners)", load: async () => (await import("./serve/serve-command.ts")).serveCommand },
  agent: { summary: "run the node agent (GPU discovery, engine supervision)", load: async () => (await import("./agent/command.ts")).agentCommand },
  ctl: { summary: "operator CLI against a gateway's admin listener", load: async () => (await import("./ctl/command.ts")).ctlCommand },
  "sim-engine": { summary: "run a simulated vLLM-compatible engine", load: async () => (await import("./sim/command.ts")).simEngineCommand },
  bench: { summary: "run a benchmark scenario and print a report", load: async () => (await import("./bench/command.ts")).benchCommand },
  demo: {
    summary: "gateway plus three sim-engines; --fleet: the fleet manager on simulated GPUs",
    load: async () => (await import("./serve/demo-command.ts")).demoCommand,
  },
};

function mainUsage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return ["usage: llmgw <command> [flags]", "", "commands:", ...lines, "", "Run 'llmgw <command> --help' for a command's flags."].join("\n");
}

/**
 * Fallback where exec is impossible (no glibc): run ourselves as a child
 * bound to us (LLMGW_PARENT_PID), forwarding what a supervisor sends.
 */
async function runChildWithBunEnv(): Promise<number> {
  const proc = Bun.spawn([process.execPath, ...process.argv.slice(1)], {
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdio: ["inherit", "inherit", "inherit"],
  });
  for (const sig of ["SIGTERM", "SIGHUP"] as const) process.on(sig, () => proc.kill(sig));
  process.on("SIGINT", () => {}); // the child gets Ctrl-C from the terminal itself
  return await proc.exited;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    console.log(mainUsage());
    return name === undefined ? 2 : 0;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    console.error(`llmgw: unknown command '${name}'\n\n${mainUsage()}`);
    return 2;
  }
  const spec = await entry.load();
  try {
    if (spec.dispatch) return await spec.dispatch(rest);
    const args = parseCommandArgs(spec, rest);
    if (args.values.help === true) {
      console.log(spec.usage);
      return 0;
    }
    return await spec.run(args);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(err.showUsage ? `llmgw ${name}: ${err.message}\n\n${spec.usage}` : `llmgw ${name}: ${err.message}`);
      return 2;
    }
    throw err;
  }
}

if (import.meta.main) {
  // Bun reads its limits at start only: become a process that has them
  // (same pid, so systemd and kill -9 still reach the serving process).
  const needsEnv = missingBunEnv().length > 0;
  if (needsEnv) execSelfWithBunEnv();
  bindToParent();
  let code: number;
  if (needsEnv) {
    code = await runChildWithBunEnv();
  } else {
    try {
      code = await main(process.argv.slice(2));
    } catch (err) {
      console.error(`llmgw: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      code = 1;
    }
  }
  await flushLogger();
  process.exit(code);
}
