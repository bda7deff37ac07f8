/**
 * Open-loop load from its own process: every request is sent at its
 * scheduled time whether or not earlier ones have been answered (a trace's
 * users do not wait for each other), and how late each send was is
 * measured, so a report can show the pacing held. Prompts are built here,
 * from their segments, just before they are due (a trace's prompts
 * together are hundreds of MB; a shared block's text is built once), and
 * each answer is read as a stream (./timed-completion.ts).
 *
 * It runs in a process of its own so that the bench's own work (its
 * engines' and gateway's output, its summaries) never delays a send, and so
 * that a test runner's 256-request limit does not apply
 * (docs/development.md#running-the-tests).
 *
 * As a module: startOpenLoop(options) spawns this file and returns its
 * records. As a script: options in the JSON file named by argv[2]; one JSON
 * line per message on stdout; any line on stdin, or stdin closing, aborts
 * what is in flight and ends the run.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../../shared/process-env.ts";
import { LogHistogram, type LogHistogramData } from "./log-histogram.ts";
import { type PromptSegment, PromptTextCache } from "./prompt-text.ts";
import { type CompletionTiming, timedCompletion } from "./timed-completion.ts";

export interface ScheduledRequest {
  /** Send time, ms after the run starts (any speed-up already applied). */
  atMs: number;
  segments: PromptSegment[];
  /** max_tokens, sent with ignore_eos so the engine generates exactly this many. */
  maxTokens: number;
}

interface OpenLoopOptions {
  /** The /v1/completions URL. */
  url: string;
  model: string;
  /** In send order (atMs non-decreasing). */
  requests: ScheduledRequest[];
  headers?: Record<string, string>;
  /** After the last send, answers still open this much later are aborted and recorded as unfinished. */
  drainMs: number;
}

/** One request's outcome, as the load process saw it. */
export interface RequestRecord extends CompletionTiming {
  /** Index into OpenLoopOptions.requests. */
  id: number;
  /** Scheduled send, ms after the run started. */
  atMs: number;
  /** Actual send − scheduled, ms (≥ 0). */
  lateMs: number;
}

export interface OpenLoopProgress {
  elapsedMs: number;
  sent: number;
  done: number;
  inFlight: number;
  errors: number;
}

export interface OpenLoopResult {
  records: RequestRecord[];
  /** Every gap between token chunks of every answer, ms. */
  itl: LogHistogramData;
  /** Run start → last answer ended, ms. */
  wallMs: number;
  /** CPU the load process used (user + system), s: with wallMs, whether it had room to keep pace. */
  cpuS: number;
}

type Message =
  | { type: "progress"; progress: OpenLoopProgress }
  | { type: "record"; record: RequestRecord }
  | { type: "end"; itl: LogHistogramData; wallMs: number; cpuS: number };

const PROGRESS_EVERY_MS = 1_000;
/** Prompts are built this far ahead of their send time. */
const PREPARE_AHEAD_MS = 50;
/** Bun's timers wake up to ~1 ms early; the last stretch is waited out yielding to I/O. */
const SPIN_BELOW_MS = 1;

function completionBody(model: string, prompt: string, maxTokens: number): string {
  // ignore_eos (vLLM's extension): the answer is exactly max_tokens long, as the trace's was.
  return JSON.stringify({ model, prompt, max_tokens: maxTokens, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
}

async function until(at: number): Promise<void> {
  for (;;) {
    const d = at - performance.now();
    if (d <= 0) return;
    if (d > SPIN_BELOW_MS) await Bun.sleep(d);
    else await new Promise<void>((r) => setImmediate(r));
  }
}

async function run(o: OpenLoopOptions, stopped: Promise<void>, emit: (m: Message) => void): Promise<void> {
  const ac = new AbortController();
  let stopping = false;
  void stopped.then(() => {
    stopping = true;
    ac.abort();
  });
  const texts = new PromptTextCache();
  const gaps = new LogHistogram();
  const bodies = new Map<number, string>();
  const inFlight = new Set<Promise<void>>();
  const p: OpenLoopProgress = { elapsedMs: 0, sent: 0, done: 0, inFlight: 0, errors: 0 };
  const body = (i: number): string => {
    const r = o.requests[i]!;
    return bodies.get(i) ?? completionBody(o.model, texts.prompt(r.segments), r.maxTokens);
  };
  // The first prompts are built before the clock starts: a trace often opens with a burst.
  let prepared = 0;
  for (; prepared < o.requests.length && o.requests[prepared]!.atMs <= PREPARE_AHEAD_MS; prepared++) bodies.set(prepared, body(prepared));
  const t0 = performance.now();
  const ticker = setInterval(
    () => emit({ type: "progress", progress: { ...p, elapsedMs: performance.now() - t0, inFlight: inFlight.size } }),
    PROGRESS_EVERY_MS,
  );
  let lastEnd = t0;

  const send = (i: number): void => {
    const r = o.requests[i]!;
    const b = body(i);
    bodies.delete(i);
    const sentAt = performance.now();
    const lateMs = Math.max(0, sentAt - (t0 + r.atMs));
    const done = timedCompletion(o.url, b, { headers: o.headers ?? {}, signal: ac.signal, gaps, sentAt }).then((t) => {
      lastEnd = performance.now();
      if (stopping && t.error !== undefined) t.error = "unfinished: aborted at the end of the run";
      p.done++;
      if (t.error !== undefined) p.errors++;
      emit({ type: "record", record: { id: i, atMs: r.atMs, lateMs, ...t } });
    });
    inFlight.add(done);
    void done.finally(() => inFlight.delete(done));
    p.sent++;
  };

  let next = 0;
  while (next < o.requests.length && !stopping) {
    const due = t0 + o.requests[next]!.atMs;
    // Build the prompts due soon while there is time to spare.
    for (prepared = Math.max(prepared, next); prepared < o.requests.length && t0 + o.requests[prepared]!.atMs <= due + PREPARE_AHEAD_MS; prepared++) {
      if (performance.now() >= due) break;
      bodies.set(prepared, body(prepared));
    }
    await until(due);
    const now = performance.now();
    while (next < o.requests.length && t0 + o.requests[next]!.atMs <= now) send(next++);
  }
  // The drain: answers still open when it lapses are aborted (recorded as unfinished).
  const drain = setTimeout(() => {
    stopping = true;
    ac.abort();
  }, o.drainMs);
  while (inFlight.size > 0) await Promise.all([...inFlight]);
  clearTimeout(drain);
  clearInterval(ticker);
  // Requests never sent (the run was stopped first) are accounted for too.
  for (let i = next; i < o.requests.length; i++) {
    emit({
      type: "record",
      record: { id: i, atMs: o.requests[i]!.atMs, lateMs: 0, status: 0, durationMs: 0, outputTokens: 0, error: "unsent: the run was stopped first" },
    });
  }
  const cpu = process.cpuUsage();
  emit({ type: "end", itl: gaps.toJSON(), wallMs: lastEnd - t0, cpuS: (cpu.user + cpu.system) / 1e6 });
}

interface OpenLoopRun {
  /** Resolves once every request has ended (answered, failed or aborted at the drain limit). */
  done: Promise<OpenLoopResult>;
  /** Abort what is in flight and send nothing more (the result still accounts for every request). */
  stop(): void;
}

/** Headers the load process sends but the options file never holds (an API key): they travel in its environment. */
const SECRET_HEADERS_ENV = "LLMGW_OPEN_LOOP_SECRET_HEADERS";

/** @param secretHeaders sent with every request like o.headers, but never written to disk */
export function startOpenLoop(
  o: OpenLoopOptions,
  onProgress: (p: OpenLoopProgress) => void = () => {},
  secretHeaders: Record<string, string> = {},
): OpenLoopRun {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-open-loop-"));
  const optionsFile = join(dir, "options.json");
  writeFileSync(optionsFile, JSON.stringify(o));
  const proc = Bun.spawn([process.execPath, import.meta.path, optionsFile], {
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid), [SECRET_HEADERS_ENV]: JSON.stringify(secretHeaders) }),
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const err = new Response(proc.stderr).text();
  const done = (async (): Promise<OpenLoopResult> => {
    const records: RequestRecord[] = [];
    let end: { itl: LogHistogramData; wallMs: number; cpuS: number } | undefined;
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of proc.stdout) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() === "") continue;
        const m = JSON.parse(line) as Message;
        switch (m.type) {
          case "progress":
            onProgress(m.progress);
            break;
          case "record":
            records.push(m.record);
            break;
          case "end":
            end = { itl: m.itl, wallMs: m.wallMs, cpuS: m.cpuS };
            break;
          default: {
            const never: never = m;
            throw new Error(`unknown message ${JSON.stringify(never)}`);
          }
        }
      }
    }
    const code = await proc.exited;
    rmSync(dir, { recursive: true, force: true });
    if (code !== 0 || end === undefined) throw new Error(`open-loop load process exited ${code}: ${(await err).slice(-2000)}`);
    records.sort((a, b) => a.id - b.id);
    return { records, ...end };
  })();
  return {
    done,
    stop() {
      try {
        proc.stdin.write("stop\n");
        void proc.stdin.end();
      } catch {
        // it has exited already
      }
    },
  };
}

if (import.meta.main) {
  // Ctrl-C reaches the whole foreground group: the bench stops this process through stdin and still reports.
  process.on("SIGINT", () => {});
  const o = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as OpenLoopOptions;
  const secret = JSON.parse(process.env[SECRET_HEADERS_ENV] ?? "{}") as Record<string, string>;
  o.headers = { ...o.headers, ...secret };
  const stopped = (async () => {
    for await (const _ of Bun.stdin.stream()) return;
  })();
  await run(o, stopped, (m) => process.stdout.write(`${JSON.stringify(m)}\n`));
  process.exit(0);
}
