/**
 * Scenario: `llmgw ctl` (in process, output captured) against the
 * management API served on port 0, over two fake agents; node-b's
 * dcgm-exporter (the shared T4 capture, XID 79 set) reports its GPU 0 fell
 * off the bus. Tables name each unhealthy GPU and why; explain-placement
 * names every node for a model that fits nowhere; scale, cordon, drain
 * (waiting, with progress, and --no-wait) work; --json prints the API's
 * answer; colour only on a terminal; distinct exit codes for an unreachable
 * gateway, a refused token, an unknown node and a refused change.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "bun";
import { runCtl } from "../../src/ctl/command.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { agentGpus } from "../fixtures/fleet/gpus.ts";
import { type FakeAgent, startFakeAgent } from "../helpers/fake-agent.ts";
import { sharedFixture } from "../helpers/fixtures.ts";
import { ADMIN_TOKEN, serveFleetApi, startFleet, type TestFleet } from "../helpers/fleet.ts";
import { waitUntil } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "ctl-"));
let a: FakeAgent;
let b: FakeAgent;
let dcgm: Server<unknown>;
let fleet: TestFleet;
let api: { url: string; stop(): Promise<void> };

async function ctl(args: string[], opts: { tty?: boolean; env?: Record<string, string> } = {}): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runCtl(args, {
    out: (t) => (out += `${t}\n`),
    err: (t) => (err += `${t}\n`),
    isTty: opts.tty ?? false,
    env: { LLMGW_GATEWAY: api.url, ...opts.env },
  });
  return { code, out, err };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: an ANSI escape starts with ESC
const ANSI = /\u001b\[/;

beforeAll(async () => {
  setLogLevel("error");
  const xid79 = sharedFixture("dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt").replace(/(DCGM_FI_DEV_XID_ERRORS\{[^}]*\}) 0/, "$1 79");
  dcgm = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(xid79) });
  a = startFakeAgent("node-a", agentGpus("h100", 2, "a"));
  b = startFakeAgent("node-b", agentGpus("h100", 2, "b"));
  fleet = await startFleet({
    data_dir: join(tmp, "data"),
    nodes: [
      { name: "node-a", url: a.url, token: a.token },
      { name: "node-b", url: b.url, token: b.token, dcgm_url: `http://127.0.0.1:${dcgm.port}/metrics` },
    ],
    fleet: {
      agent_poll_interval_ms: 100,
      node_not_ready_after_ms: 1_000,
      reconcile_interval_ms: 100,
      models: [
        { name: "m", engine: "vllm", replicas: 1 },
        { name: "big", engine: "vllm", replicas: 0, tensor_parallel: 2, gpu_class: "h200-140g" },
      ],
    },
  });
  api = serveFleetApi(fleet.manager);
  await waitUntil(() => fleet.sink.serving().length === 1 && fleet.manager.state.registry.get("node-b")?.snapshot?.dcgm?.ok === true, {
    what: "m in rotation, DCGM scraped",
  });
});

afterAll(async () => {
  await api.stop();
  await fleet.stop();
  await Promise.all([a.stop(), b.stop(), dcgm.stop(true)]);
  rmSync(tmp, { recursive: true, force: true });
  setLogLevel("info");
});

describe("llmgw ctl", () => {
  test("nodes: an aligned table, then each GPU kept out of placement with its reason", async () => {
    const r = await ctl(["nodes"]);
    expect(r.code).toBe(0);
    const lines = r.out.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NODE {4}STATE {2}SCHEDULING {2}GPUS {2}FREE {2}UNHEALTHY {2}REPLICAS {2}FABRIC +LAST ANSWER +ERROR$/);
    // Pack: m went to node-b, whose only healthy GPU it fills, keeping node-a whole.
    expect(lines[1]).toMatch(/^node-a +Ready +ok +2 +2 +0 +0 +single-node +\d+\.\d s ago +-$/);
    expect(lines[2]).toMatch(/^node-b +Ready +ok +2 +0 +1 +1 +single-node +\d+\.\d s ago +-$/);
    // Aligned: every row's cells start where their header does.
    for (const [header, cell] of [
      ["GPUS", /^2 /],
      ["FABRIC", /^single-node /],
      ["LAST ANSWER", /^\d+\.\d s ago /],
      ["ERROR", /^-$/],
    ] as const) {
      const at = lines[0]!.indexOf(header);
      for (const row of lines.slice(1, 3)) expect(row.slice(at)).toMatch(cell);
    }
    expect(r.out).toContain("GPUs kept out of placement:\nNODE    GPU  CLASS     REASON\nnode-b  0    h100-80g  DCGM: xid 79: GPU has fallen off the bus");
    expect(r.out).not.toMatch(ANSI);
  });

  test("colour only on a terminal, and never with NO_COLOR", async () => {
    expect((await ctl(["nodes"], { tty: true })).out).toMatch(ANSI);
    expect((await ctl(["nodes"], { tty: true, env: { NO_COLOR: "1" } })).out).not.toMatch(ANSI);
  });

  test("--json prints the API's answer", async () => {
    const r = await ctl(["nodes", "--json"]);
    const body = JSON.parse(r.out) as { nodes: { name: string; gpus: { faults: string[] }[] }[] };
    expect(body.nodes[1]!.gpus[0]!.faults).toEqual(["DCGM: xid 79: GPU has fallen off the bus"]);
  });

  test("models and replicas", async () => {
    const models = await ctl(["models"]);
    expect(models.out).toMatch(/^MODEL +ENGINE +DESIRED +ACTIVE +READY +SERVING +LEAVING +FAILURES +NEXT ATTEMPT +ADAPTERS\n/);
    expect(models.out).toMatch(/\nm +vllm +1 +1 +1 +1 +0 +0 +- +-\n/);
    const replicas = await ctl(["replicas"]);
    const id = fleet.sink.serving()[0]!.id;
    expect(replicas.out).toMatch(new RegExp(`\\n${id} +m +Ready +node-b:1 +in +0 +-\\n`));
  });

  test("explain-placement for a model that fits nowhere names every node and its reasons", async () => {
    const r = await ctl(["explain-placement", "big"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("big: 0 of 1 replica(s) can be placed; no eligible candidate");
    expect(r.out).toMatch(/\nnode-a +0,1 +h100-80g +rejected +- +- +wrong-gpu-class: GPU class h100-80g; the model asks for h200-140g\n/);
    expect(r.out).toMatch(
      /\nnode-b +0,1 +h100-80g +rejected +- +- +wrong-gpu-class: GPU class h100-80g; the model asks for h200-140g\n +too-few-free-gpus: needs 2 free h100-80g GPU\(s\), 0 free of 2; in use: GPU 1 by fl-m-\w+; unhealthy: GPU 0: DCGM: xid 79: GPU has fallen off the bus\n/,
    );
  });

  test("explain-placement gives the eligible node's score and the rule that ranked it first, as a table and as JSON", async () => {
    const r = await ctl(["explain-placement", "m"]);
    expect(r.code).toBe(0);
    // node-a: no replica of m yet, one of its two GPUs left after; node-b has no healthy free GPU.
    expect(r.out).toMatch(/\nNODE +GPUS +CLASS +VERDICT +REPLICAS HERE +FREE AFTER +REASONS\n/);
    expect(r.out).toMatch(/\nnode-a +0 +h100-80g +chosen \(#1\) +0 +1 +-\n/);
    expect(r.out).toContain("ranked first: node-a:0, the only eligible candidate");
    const j = JSON.parse((await ctl(["explain-placement", "m", "--json"])).out);
    expect(j.decision).toEqual({ rule: "only-candidate", winner: { node: "node-a", gpus: [0] }, runner_up: null });
    expect(j.candidates.find((c: { node: string }) => c.node === "node-a").score).toEqual({ model_replicas: 0, free_gpus_after: 1 });
    expect(j.candidates.find((c: { node: string }) => c.node === "node-b").score).toBeNull();
  });

  test("exit codes: unreachable 4, token refused 5, no such node 6, refused change 7, usage 2", async () => {
    expect((await ctl(["nodes", "--gateway", "http://127.0.0.1:1"])).code).toBe(4);
    const noToken = await ctl(["scale", "m", "2"]);
    expect(noToken.code).toBe(5);
    expect(noToken.err).toContain("the gateway refused the token");
    expect((await ctl(["scale", "m", "2", "--token", "wrong-token-000000000"])).code).toBe(5);
    const noNode = await ctl(["cordon", "nope", "--token", ADMIN_TOKEN]);
    expect(noNode.code).toBe(6);
    expect(noNode.err).toContain("no node 'nope'");
    const tooMany = await ctl(["scale", "m", "5000", "--token", ADMIN_TOKEN]);
    expect(tooMany.code).toBe(7);
    expect(tooMany.err).toContain("refused: replicas:");
    expect((await ctl(["scale", "m", "two", "--token", ADMIN_TOKEN])).code).toBe(2);
    expect((await ctl(["drain"])).code).toBe(2);
    expect((await ctl(["nodes", "--reason", "x"])).code).toBe(2);
    expect(fleet.manager.state.models.get("m")!.spec.replicas).toBe(1);
  });

  test("scale, cordon and uncordon", async () => {
    const env = { LLMGW_ADMIN_TOKEN: ADMIN_TOKEN };
    expect((await ctl(["scale", "m", "2"], { env })).out).toContain("m: desired 2 replica(s)");
    await waitUntil(() => fleet.sink.serving().length === 2, { what: "2 replicas" });
    expect((await ctl(["cordon", "node-a", "--reason", "bios update"], { env })).out).toContain("node-a cordoned");
    expect(fleet.manager.state.cordons.get("node-a")?.reason).toBe("bios update");
    expect((await ctl(["uncordon", "node-a"], { env })).out).toBe("node-a uncordoned\n");
    expect((await ctl(["scale", "m", "1"], { env })).code).toBe(0);
    await waitUntil(() => fleet.sink.serving().length === 1, { what: "back to 1 replica" });
  });

  test("drain waits and shows progress; --no-wait returns at once", async () => {
    const env = { LLMGW_ADMIN_TOKEN: ADMIN_TOKEN };
    const onB = fleet.sink.serving().find((e) => e.node === "node-b")!;
    fleet.sink.inflights.set(onB.id, 1);
    setTimeout(() => fleet.sink.inflights.set(onB.id, 0), 1_500);
    const r = await ctl(["drain", "node-b", "--grace-ms", "20000"], { env });
    expect(r.code).toBe(0);
    expect(r.out).toContain("node-b: draining, 1 replica(s) left");
    expect(r.out).toMatch(/\n {2}waiting for fl-m-\w+: 1 request\(s\) in flight\n {2}waiting for fl-m-\w+: or the grace period, \d+ s left\n/);
    expect(r.out).toMatch(/node-b: drain done after \d+\.\d s\n$/);
    expect(fleet.sink.serving().map((e) => e.node)).toEqual(["node-a"]);
    const noWait = await ctl(["drain", "node-a", "--no-wait", "--json"], { env });
    expect(noWait.code).toBe(0);
    expect(JSON.parse(noWait.out)).toMatchObject({ node: "node-a", state: "running" });
    await ctl(["uncordon", "node-b"], { env });
    await ctl(["uncordon", "node-a"], { env });
  }, 30_000);
});
