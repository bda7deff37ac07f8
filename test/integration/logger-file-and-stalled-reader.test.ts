/**
 * The shared logger in a real process: lines reach a file without the
 * process exiting (the periodic flush), and a stdout reader that stops
 * reading neither stalls the event loop nor grows the process without bound
 * (past the buffer limit, lines are dropped).
 */
import { expect, test } from "bun:test";
import { closeSync, constants, mkdtempSync, openSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/processes.ts";

const LOGGER = join(REPO_ROOT, "src", "shared", "logger.ts");

test("a logged line reaches a file within the flush interval while the process keeps running", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "llmgw-log-")), "out.log");
  const file = Bun.file(path);
  const code = `
    const { logger } = await import(${JSON.stringify(LOGGER)});
    logger().info({ n: 1 }, "first line");
    await Bun.sleep(20000);
  `;
  const proc = Bun.spawn([process.execPath, "-e", code], { stdout: file, stderr: "pipe" });
  try {
    let text = "";
    // Generous: the child's start-up on a busy machine counts too.
    for (let i = 0; i < 200 && !text.includes("first line"); i++) {
      await Bun.sleep(50);
      text = readFileSync(path, "utf8");
    }
    expect(text).toContain('"msg":"first line"');
    expect(proc.exitCode).toBeNull(); // written by the periodic flush, not at exit
  } finally {
    proc.kill();
    await proc.exited;
  }
});

test("a stdout reader that stops reading: timers keep running and memory stays bounded", async () => {
  // 200k lines of ~1 KiB = ~200 MiB into a pipe nobody reads after the start.
  const code = `
    const { logger } = await import(${JSON.stringify(LOGGER)});
    const pad = "x".repeat(1000);
    let ticks = 0;
    let last = performance.now();
    let maxGapMs = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      maxGapMs = Math.max(maxGapMs, now - last);
      last = now;
      ticks++;
    }, 10);
    const rss0 = process.memoryUsage().rss;
    for (let i = 0; i < 200; i++) {
      for (let j = 0; j < 1000; j++) logger().info({ i, j, pad }, "bulk");
      await Bun.sleep(1);
    }
    await Bun.sleep(300);
    clearInterval(timer);
    Bun.gc(true);
    console.error(JSON.stringify({ ticks, maxGapMs, grewMiB: (process.memoryUsage().rss - rss0) / 2 ** 20 }));
    process.exit(0);
  `;
  const proc = Bun.spawn([process.execPath, "-e", code], { stdout: "pipe", stderr: "pipe" });
  // Read nothing from stdout: the pipe fills after 64 KiB and stays full.
  const err = await new Response(proc.stderr).text();
  const code_ = await proc.exited;
  expect(code_).toBe(0);
  const r = JSON.parse(err.trim().split("\n").at(-1)!) as { ticks: number; maxGapMs: number; grewMiB: number };
  // The event loop kept turning: no write blocked it (a blocked write would stop the ticks for good).
  expect(r.ticks).toBeGreaterThan(10);
  expect(r.maxGapMs).toBeLessThan(5_000);
  // The buffer is capped at 32 MiB; without the cap this grows by ~200 MiB.
  expect(r.grewMiB).toBeLessThan(120);
  void proc.stdout.cancel();
}, 60_000);

test("exiting with stdout on a full pipe whose reader stopped: flushLogger() gives up, the process exits", async () => {
  // A shell redirect gives the child a *blocking* pipe (as \`llmgw serve > fifo\`
  // or a stuck log shipper would); a synchronous write to it never returns.
  const dir = mkdtempSync(join(tmpdir(), "llmgw-log-"));
  const fifo = join(dir, "stdout.fifo");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK); // opened, never read
  const code = `
    const { logger, flushLogger } = await import(${JSON.stringify(LOGGER)});
    const pad = "x".repeat(1000);
    for (let j = 0; j < 2000; j++) logger().info({ j, pad }, "bulk");
    await Bun.sleep(300);
    const t0 = performance.now();
    await flushLogger();
    console.error(JSON.stringify({ flushMs: performance.now() - t0 }));
    process.exit(0);
  `;
  const proc = Bun.spawn(["sh", "-c", 'exec "$0" -e "$1" > "$2"', process.execPath, code, fifo], { stderr: "pipe" });
  const timer = setTimeout(() => proc.kill(9), 15_000);
  try {
    const err = await new Response(proc.stderr).text();
    expect(await proc.exited).toBe(0);
    const r = JSON.parse(err.trim().split("\n").at(-1)!) as { flushMs: number };
    expect(r.flushMs).toBeLessThan(3000);
  } finally {
    clearTimeout(timer);
    closeSync(readEnd);
  }
}, 30_000);
