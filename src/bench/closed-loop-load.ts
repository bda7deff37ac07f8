/**
 * Closed-loop streaming load from its own process: `clients` loops, each
 * sending a streaming request and, when it ends, the next one, until told to
 * stop. Benchmarks run their background load here so that the process which
 * times the measured requests does not also carry hundreds of load streams
 * on its event loop (that queuing would be the client's, not the gateway's).
 *
 * As a module: startClosedLoopLoad(opts) spawns this file with the llmgw
 * environment; stop() writes "stop" to its stdin and returns its counts. As
 * a script: options in the JSON file named by argv[2] (thousands of request
 * bodies do not fit in one argument); it also stops when stdin closes, so it
 * never outlives the process that started it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../shared/process-env.ts";
import { timedStream } from "./stream-client.ts";

interface ClosedLoopLoadOptions {
  url: string;
  clients: number;
  /** Request body for client i. */
  bodies: string[];
  headers?: Record<string, string>;
}

export interface ClosedLoopLoadCounts {
  completed: number;
  errors: number;
}

interface ClosedLoopLoad {
  stop(): Promise<ClosedLoopLoadCounts>;
}

export function startClosedLoopLoad(opts: ClosedLoopLoadOptions): ClosedLoopLoad {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-load-"));
  const optionsFile = join(dir, "options.json");
  writeFileSync(optionsFile, JSON.stringify(opts));
  const proc = Bun.spawn([process.execPath, import.meta.path, optionsFile], {
    env: childEnv(),
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = new Response(proc.stdout).text();
  const err = new Response(proc.stderr).text();
  void proc.exited.finally(() => rmSync(dir, { recursive: true, force: true }));
  return {
    async stop() {
      try {
        proc.stdin.write("stop\n");
        await proc.stdin.end();
      } catch {
        // it already exited: its exit code says how
      }
      const code = await proc.exited;
      if (code !== 0) throw new Error(`load process exited ${code}: ${(await err).slice(-2000)}`);
      return JSON.parse((await out).trim()) as ClosedLoopLoadCounts;
    },
  };
}

async function run(o: ClosedLoopLoadOptions, stopped: Promise<void>): Promise<ClosedLoopLoadCounts> {
  let running = true;
  const ac = new AbortController();
  const counts: ClosedLoopLoadCounts = { completed: 0, errors: 0 };
  void stopped.then(() => {
    running = false;
    ac.abort();
  });
  const loops = Array.from({ length: o.clients }, async (_, i) => {
    const body = o.bodies[i % o.bodies.length]!;
    while (running) {
      const r = await timedStream(o.url, body, { signal: ac.signal, headers: o.headers ?? {} });
      if (!running) break;
      if (r.ok) counts.completed++;
      else {
        counts.errors++;
        await Bun.sleep(50);
      }
    }
  });
  await Promise.all(loops);
  return counts;
}

if (import.meta.main) {
  const o = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as ClosedLoopLoadOptions;
  // Any line on stdin, or stdin closing (the parent is gone), stops the load.
  const stopped = (async () => {
    for await (const _ of Bun.stdin.stream()) return;
  })();
  console.log(JSON.stringify(await run(o, stopped)));
  process.exit(0);
}
