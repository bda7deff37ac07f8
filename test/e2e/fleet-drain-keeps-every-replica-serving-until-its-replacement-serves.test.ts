/**
 * Scenario: in `llmgw demo --fleet`, an operator scales the model to 3
 * replicas (two land on one node) and drains that node with `llmgw ctl
 * drain`. Sampled all through the drain, the gateway keeps 3 replicas in
 * rotation: each original leaves only once its own replacement serves. Then
 * a drain with room for only one of two replacements: the other original
 * keeps serving until the grace period ends, and `ctl drain` and the log say
 * why.
 */
import { afterAll, expect, test } from "bun:test";
import { childEnv } from "../../src/shared/process-env.ts";
import { spawnDemo } from "../helpers/demo-process.ts";
import { CLI, REPO_ROOT, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-llama-8b";
/** The no-room drain's grace period: long enough to see the held original serve, short enough for the test. */
const SHORT_GRACE_MS = 8_000;

let demo: Bun.Subprocess<"ignore", "pipe", "pipe"> | undefined;

afterAll(() => {
  if (demo && demo.exitCode === null) process.kill(-demo.pid, "SIGKILL");
});

function readInto(stream: ReadableStream<Uint8Array>, sink: { text: string }): void {
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) sink.text += decoder.decode(chunk, { stream: true });
  })().catch(() => {});
}

async function ctl(env: Record<string, string>, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn([process.execPath, CLI, "ctl", ...args], { cwd: REPO_ROOT, env: childEnv({ NO_COLOR: "1", ...env }), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}

/** Fleet replicas the gateway routes new requests to (ready, not draining). */
async function serving(admin: string): Promise<number> {
  const body = (await (await fetch(`${admin}/admin/v1/endpoints`, { signal: AbortSignal.timeout(5_000) })).json()) as {
    endpoints: { node: string | null; ready: boolean; draining: boolean }[];
  };
  return body.endpoints.filter((e) => e.node !== null && e.ready && !e.draining).length;
}

/** Run `drain` while sampling the serving count; each sample carries when its answer came, in ms since the drain was asked for. */
async function sampleDuring(admin: string, drain: () => Promise<{ code: number; out: string; err: string }>) {
  const samples: { atMs: number; serving: number }[] = [];
  const started = Date.now();
  let done = false;
  const result = drain().finally(() => (done = true));
  while (!done) {
    const n = await serving(admin);
    samples.push({ atMs: Date.now() - started, serving: n });
    await Bun.sleep(50);
  }
  return { result: await result, samples, ms: Date.now() - started };
}

test("a drain keeps every replica serving until its replacement serves, and holds an original it has no room to replace until the grace period ends", async () => {
  demo = spawnDemo(["--fleet"]);
  const out = { text: "" };
  const errors = { text: "" };
  readInto(demo.stdout, out);
  readInto(demo.stderr, errors);
  await waitUntil(() => out.text.includes("Press Ctrl-C"), { timeoutMs: 90_000, intervalMs: 100, what: `the demo's banner (stderr: ${errors.text})` });
  const admin = /Dashboard\s+(\S+)\/dashboard/.exec(out.text)![1]!;
  const env = { LLMGW_ADMIN_TOKEN: /LLMGW_ADMIN_TOKEN=(\S+)/.exec(out.text)![1]!, LLMGW_GATEWAY: admin };

  // Three desired: node-1 and node-2 had one each; the third goes to either, so one node holds two.
  expect((await ctl(env, ["scale", MODEL, "3"])).code).toBe(0);
  await waitUntil(async () => (await serving(admin)) === 3, { timeoutMs: 30_000, intervalMs: 100, what: "3 replicas serving" });
  const nodes = JSON.parse((await ctl(env, ["nodes", "--json"])).out) as { nodes: { name: string; replicas: string[] }[] };
  const crowded = nodes.nodes.find((n) => n.replicas.length === 2)!.name;
  const other = nodes.nodes.find((n) => n.name !== crowded)!.name;

  // Room on the other node (4 GPUs, 1 taken) for both replacements: never fewer than 3 serving.
  const first = await sampleDuring(admin, () => ctl(env, ["drain", crowded]));
  console.error(`drain of ${crowded}: ${first.ms} ms, ${first.samples.length} samples, serving ${first.samples.map((s) => s.serving).join(" ")}`);
  expect({ code: first.result.code, err: first.result.err }).toEqual({ code: 0, err: "" });
  expect(first.samples.length).toBeGreaterThan(3);
  expect(Math.min(...first.samples.map((s) => s.serving))).toBeGreaterThanOrEqual(3);
  expect(first.result.out).toContain("stays in rotation until its replacement serves");
  expect(first.ms).toBeLessThan(60_000);

  // Five desired with the drained node back: two land on it, the other node keeps 3 of its 4 GPUs.
  expect((await ctl(env, ["uncordon", crowded])).code).toBe(0);
  expect((await ctl(env, ["scale", MODEL, "5"])).code).toBe(0);
  await waitUntil(async () => (await serving(admin)) === 5, { timeoutMs: 30_000, intervalMs: 100, what: "5 replicas serving" });
  const spread = JSON.parse((await ctl(env, ["nodes", "--json"])).out) as { nodes: { name: string; replicas: string[] }[] };
  expect(Object.fromEntries(spread.nodes.map((n) => [n.name, n.replicas.length]))).toEqual({ [crowded]: 2, [other]: 3 });

  // Room for one replacement only: the second original serves on until the grace period ends, then goes.
  const second = await sampleDuring(admin, () => ctl(env, ["drain", crowded, "--grace-ms", String(SHORT_GRACE_MS)]));
  console.error(`drain of ${crowded} with room for one: ${second.ms} ms, serving ${second.samples.map((s) => `${s.atMs}:${s.serving}`).join(" ")}`);
  expect(second.result.code).toBe(0);
  expect(second.result.out).toContain("no place for it");
  // An answer that came before the grace period could end (it began after the drain was asked for) saw all 5.
  const withinGrace = second.samples.filter((s) => s.atMs < SHORT_GRACE_MS);
  expect(withinGrace.length).toBeGreaterThan(3);
  expect(Math.min(...withinGrace.map((s) => s.serving))).toBeGreaterThanOrEqual(5);
  expect(second.ms).toBeGreaterThanOrEqual(SHORT_GRACE_MS);
  expect(await serving(admin)).toBe(4);
  await waitUntil(() => errors.text.includes("no room for a replacement") || out.text.includes("no room for a replacement"), {
    timeoutMs: 5_000,
    what: "the log to say there was no room",
  });

  process.kill(demo.pid, "SIGINT");
  expect(await demo.exited).toBe(0);
}, 150_000);
