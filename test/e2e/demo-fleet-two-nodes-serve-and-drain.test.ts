/**
 * Scenario: a newcomer runs `llmgw demo --fleet` from a clone and follows its
 * banner. Both simulated nodes are Ready with their GPUs, a replica answers a
 * chat completion through the real `openai` client, `llmgw ctl drain` (the
 * real CLI, with the token the banner exported) moves node-1's replica to
 * node-2 and completes, the gateway still answers, and Ctrl-C (SIGINT) stops
 * the gateway, both agents and every engine.
 */
import { afterAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { childEnv } from "../../src/shared/process-env.ts";
import { spawnDemo } from "../helpers/demo-process.ts";
import { CLI, REPO_ROOT, waitUntil } from "../helpers/processes.ts";

interface Banner {
  api: string;
  admin: string;
  agents: Record<string, string>;
  env: Record<string, string>;
}

let demo: Bun.Subprocess<"ignore", "pipe", "pipe"> | undefined;

afterAll(() => {
  // Only if the test failed before its own SIGINT: the whole group, agents and engines included.
  if (demo && demo.exitCode === null) process.kill(-demo.pid, "SIGKILL");
});

/** Read `stream` until `until` appears; resolves with everything read so far (the reading goes on into `sink`). */
function readUntil(stream: ReadableStream<Uint8Array>, until: string, sink: { text: string }): Promise<string> {
  return new Promise((resolve, reject) => {
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) {
        sink.text += decoder.decode(chunk, { stream: true });
        if (sink.text.includes(until)) resolve(sink.text);
      }
      reject(new Error(`the demo's output ended before '${until}':\n${sink.text}`));
    })();
  });
}

/** What the banner tells the user: the URLs and the `export` lines. */
function parseBanner(text: string): Banner {
  const api = /OpenAI API\s+(\S+)\/v1/.exec(text)?.[1];
  const admin = /Dashboard\s+(\S+)\/dashboard/.exec(text)?.[1];
  const agents = Object.fromEntries([...text.matchAll(/(node-\d) (http:\/\/\S+)/g)].map((m) => [m[1]!, m[2]!]));
  const env = Object.fromEntries([...text.matchAll(/^ {2}export (\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  if (!api || !admin) throw new Error(`no URLs in the banner:\n${text}`);
  return { api, admin, agents, env };
}

/** `npx llmgw ctl …` as the banner writes it, in a shell with its exports. */
async function ctl(banner: Banner, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn([process.execPath, CLI, "ctl", ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ NO_COLOR: "1", ...banner.env }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}

const reachable = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(1_000) }).then(
    () => true,
    () => false,
  );

test("llmgw demo --fleet: two nodes ready, a replica serving, a drain completes, Ctrl-C stops everything", async () => {
  demo = spawnDemo(["--fleet"]);
  const out = { text: "" };
  const errors = { text: "" };
  // Progress lines ("starting 2 node agents…"), kept for the failure message.
  void readUntil(demo.stderr, "\u0000", errors).catch(() => {});
  const started = Date.now();
  const banner = parseBanner(await readUntil(demo.stdout, "Press Ctrl-C", out));
  console.error(`demo --fleet: banner after ${Date.now() - started} ms`);
  expect(Object.keys(banner.agents).sort()).toEqual(["node-1", "node-2"]);
  expect(banner.env.LLMGW_ADMIN_TOKEN).toStartWith("demo-");
  expect(banner.env.LLMGW_GATEWAY).toBe(banner.admin);
  expect(out.text).toContain("npx llmgw ctl drain node-1");
  expect((await fetch(`${banner.admin}/dashboard`)).status).toBe(200);

  // Two nodes Ready, each with its simulated GPUs; one replica on each (placement spreads them).
  const nodes = JSON.parse((await ctl(banner, ["nodes", "--json"])).out) as {
    nodes: { name: string; state: string; gpus: { class: string }[]; replicas: string[] }[];
  };
  expect(nodes.nodes.map((n) => ({ name: n.name, state: n.state, gpus: n.gpus.length, class: n.gpus[0]?.class, replicas: n.replicas.length }))).toEqual([
    { name: "node-1", state: "Ready", gpus: 4, class: "h100-80g", replicas: 1 },
    { name: "node-2", state: "Ready", gpus: 4, class: "h100-80g", replicas: 1 },
  ]);

  // A replica serves a chat completion for the openai client (by the model's alias).
  const client = new OpenAI({ baseURL: `${banner.api}/v1`, apiKey: "unused", maxRetries: 0 });
  const { data: answer, response } = await client.chat.completions
    .create({ model: "llama", max_tokens: 8, messages: [{ role: "user", content: "Hello!" }] })
    .withResponse();
  expect(answer.choices[0]!.message.content!.length).toBeGreaterThan(0);
  expect(response.headers.get("x-llmgw-endpoint")).toStartWith("fl-sim-llama-8b-");

  // Drain node-1: ctl waits, printing progress, until the replacement on node-2 serves and the original is gone.
  const drain = await ctl(banner, ["drain", "node-1"]);
  expect({ code: drain.code, err: drain.err }).toEqual({ code: 0, err: "" });
  expect(drain.out).toMatch(/node-1: drain done after \d+\.\d s\n$/);
  const replicas = JSON.parse((await ctl(banner, ["replicas", "--json"])).out) as { replicas: { phase: string; shards: { node: string }[] }[] };
  expect(replicas.replicas.map((r) => `${r.shards[0]!.node} ${r.phase}`)).toEqual(["node-2 Ready", "node-2 Ready"]);
  const after = await ctl(banner, ["nodes"]);
  expect(after.out).toMatch(/\nnode-1 +Ready +drained /);
  const stream = await client.chat.completions.create({
    model: "sim-llama-8b",
    stream: true,
    max_tokens: 8,
    messages: [{ role: "user", content: "Still there?" }],
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  expect(text.length).toBeGreaterThan(0);

  // The engines the agents run, then Ctrl-C: the demo stops the gateway, the agents and their engines.
  const engines = ((await (await fetch(`${banner.admin}/admin/v1/endpoints`)).json()) as { endpoints: { url: string }[] }).endpoints.map((e) => e.url);
  expect(engines).toHaveLength(2);
  process.kill(demo.pid, "SIGINT");
  expect(await demo.exited).toBe(0);
  expect(out.text).toContain("stopping the gateway, the node agents and their engines");
  for (const url of [banner.api, banner.admin, ...Object.values(banner.agents), ...engines]) {
    await waitUntil(async () => !(await reachable(`${url}/health`)), { timeoutMs: 5_000, what: `${url} to stop answering` });
  }
  expect(errors.text).not.toContain("Error");
}, 120_000);
