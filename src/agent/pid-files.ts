/**
 * Pid files in the agent's state directory: one JSON file per running
 * replica with what is needed to recognise the process after an agent
 * restart (pid, process group, start time, the exact argv) and to restart it
 * (spec, plan, port). Written atomically (temp file + rename).
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { replicaSpecSchema } from "./replica-spec.ts";

const pidFileSchema = z.object({
  version: z.literal(1),
  id: z.string(),
  pid: z.int(),
  pgid: z.int(),
  /** /proc/<pid>/stat starttime: guards against a reused pid with a look-alike command line. */
  startTime: z.number().nullable(),
  argv: z.array(z.string()).min(1),
  env: z.record(z.string(), z.string()),
  spec: replicaSpecSchema,
  fingerprint: z.string(),
  port: z.int(),
  endpoint: z.string(),
  probeUrl: z.string(),
  startedAtMs: z.number(),
  restarts: z.int(),
  /** Where the engine publishes KV-cache events (absent in files written before agents allocated them). */
  kvEvents: z.object({ endpoint: z.string(), replayEndpoint: z.string().nullable(), topic: z.string() }).optional(),
});

export type PidFile = z.infer<typeof pidFileSchema>;

const SUFFIX = ".pid.json";

export function pidFilePath(stateDir: string, id: string): string {
  return join(stateDir, `${id}${SUFFIX}`);
}

export function logFilePath(stateDir: string, id: string): string {
  return join(stateDir, `${id}.log`);
}

export function writePidFile(stateDir: string, rec: PidFile): void {
  mkdirSync(stateDir, { recursive: true });
  const path = pidFilePath(stateDir, rec.id);
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, JSON.stringify(rec, null, 2));
  renameSync(tmp, path);
}

export function removePidFile(stateDir: string, id: string): void {
  rmSync(pidFilePath(stateDir, id), { force: true });
}

/** Every readable pid file; unreadable ones are reported by name, not thrown. */
export function readPidFiles(stateDir: string): { records: PidFile[]; unreadable: string[] } {
  const records: PidFile[] = [];
  const unreadable: string[] = [];
  let names: string[];
  try {
    names = readdirSync(stateDir).filter((n) => n.endsWith(SUFFIX));
  } catch {
    return { records, unreadable };
  }
  for (const name of names) {
    try {
      const parsed = pidFileSchema.safeParse(JSON.parse(readFileSync(join(stateDir, name), "utf8")));
      if (parsed.success) records.push(parsed.data);
      else unreadable.push(name);
    } catch {
      unreadable.push(name);
    }
  }
  return { records, unreadable };
}
