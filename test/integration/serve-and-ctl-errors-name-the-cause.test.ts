/**
 * Scenario: an operator's mistakes, each answered by the real `llmgw` binary
 * with its cause: `ctl scale` of a model that does not exist, `ctl` against
 * a gateway that runs no fleet, a port someone else holds (one line naming
 * the port and the holder, no stack trace), an LLMGW_* value or a flag that
 * is wrong (named, not blamed on "flags" or the file), a malformed listen:
 * (one error, not two), the admin token under one name for serve and ctl,
 * the open-files warning only for a figure the operator chose,
 * `--print-config` with secrets masked, and SIGTERM ending with "stopped".
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { readOpenFilesLimit } from "../../src/shared/open-files-limit.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT, startLlmgw, stopAll } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "llmgw-errors-"));
const ADMIN_TOKEN = "errors-admin-token-0123456789";

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

async function llmgw(args: string[], env: Record<string, string> = {}, shell?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  // `shell`: a /bin/sh prefix (ulimit …) before exec'ing the CLI.
  const command = shell ? ["/bin/sh", "-c", `${shell} && exec "$0" "$@"`, process.execPath, CLI, ...args] : [process.execPath, CLI, ...args];
  const proc = Bun.spawn(command, { cwd: REPO_ROOT, env: childEnv({ NO_COLOR: "1", ...env }), stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

const ctlAt = (admin: string, args: string[], env: Record<string, string> = {}) => llmgw(["ctl", "--gateway", admin, ...args], env);

describe("ctl names what is missing", () => {
  test("scale or explain a model that does not exist: no model named it; the token comes from LLMGW_ADMIN_TOKEN on both sides", async () => {
    // The fleet's admin token is given to serve as LLMGW_ADMIN_TOKEN, the variable ctl reads: nothing in the file.
    const config = writeGatewayConfig({
      data_dir: join(tmp, "fleet-data"),
      nodes: [{ name: "gpu-01", url: "http://127.0.0.1:1", token: "agent-token" }],
      fleet: { models: [{ name: "m", engine: "sim", replicas: 0 }] },
    });
    const gw = await startLlmgw(["serve", "--config", config], { waitFor: 2, env: { LLMGW_ADMIN_TOKEN: ADMIN_TOKEN } });
    const admin = gw.urls.admin!;
    const env = { LLMGW_ADMIN_TOKEN: ADMIN_TOKEN };
    const scale = await ctlAt(admin, ["scale", "nope", "1"], env);
    expect({ code: scale.code, err: scale.stderr.trim() }).toEqual({ code: 6, err: "llmgw ctl: no model named 'nope'" });
    const explain = await ctlAt(admin, ["explain-placement", "nope"]);
    expect({ code: explain.code, err: explain.stderr.trim() }).toEqual({ code: 6, err: "llmgw ctl: no model named 'nope'" });
    // The same token accepted for a real change; without it, refused.
    expect((await ctlAt(admin, ["scale", "m", "0"], env)).code).toBe(0);
    expect((await ctlAt(admin, ["scale", "m", "0"])).code).toBe(5);
    // The cordon reason is in `ctl nodes`.
    expect((await ctlAt(admin, ["cordon", "gpu-01", "--reason", "bios update"], env)).code).toBe(0);
    const nodes = await ctlAt(admin, ["nodes"]);
    expect(nodes.stdout).toMatch(/Cordoned nodes:\nNODE +SCHEDULING +REASON\ngpu-01 +cordoned +bios update\n/);
    await gw.stop();
  }, 60_000);

  test("ctl against a gateway without a fleet: this gateway runs no fleet manager", async () => {
    const gw = await startLlmgw(
      ["serve", "--config", writeGatewayConfig({ data_dir: join(tmp, "plain-data"), endpoints: [{ id: "e", url: "http://127.0.0.1:1" }] })],
      { waitFor: 2 },
    );
    for (const args of [["nodes"], ["scale", "m", "1", "--token", ADMIN_TOKEN], ["drain", "n", "--token", ADMIN_TOKEN]]) {
      const r = await ctlAt(gw.urls.admin!, args);
      expect({ args, code: r.code }).toEqual({ args, code: 6 });
      expect(r.stderr).toStartWith("llmgw ctl: this gateway runs no fleet manager");
    }
    // Not a route: the OpenAPI document does not list it.
    const doc = (await (await fetch(`${gw.urls.admin}/openapi/json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => p.startsWith("/admin/v1/fleet"))).toEqual([]);
    await gw.stop();
  }, 30_000);
});

describe("serve names the cause", () => {
  test("a port someone holds: one line naming the port and the holder, exit 1, no stack trace", async () => {
    const holder = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("mine") });
    try {
      const port = holder.port!;
      const api = await llmgw([
        "serve",
        "--upstream",
        "http://127.0.0.1:1",
        "--listen",
        `127.0.0.1:${port}`,
        "--admin-listen",
        "127.0.0.1:0",
        "--log-level",
        "silent",
      ]);
      expect(api.code).toBe(1);
      expect(api.stderr.trim().split("\n")).toEqual([
        expect.stringMatching(
          new RegExp(
            `^llmgw serve: cannot start the API listener on 127\\.0\\.0\\.1:${port}: port ${port} is held by another process, pid ${process.pid} \\(.+\\); free it or give the gateway another --listen port$`,
          ),
        ),
      ]);
      const admin = await llmgw([
        "serve",
        "--upstream",
        "http://127.0.0.1:1",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        `127.0.0.1:${port}`,
        "--log-level",
        "silent",
      ]);
      expect(admin.code).toBe(1);
      expect(admin.stderr.trim().split("\n")).toHaveLength(1);
      expect(admin.stderr).toContain(`cannot start the admin listener on 127.0.0.1:${port}: port ${port} is held by another process, pid ${process.pid}`);
      expect(admin.stderr).toContain("--admin-listen");
      expect(admin.stderr).not.toMatch(/^\s+at /m);
    } finally {
      holder.stop(true);
    }
  }, 30_000);

  test("a bad LLMGW_* value is the variable's error, a bad flag the flag's, and a bad listen: one error", async () => {
    const env = await llmgw(["serve", "--upstream", "http://127.0.0.1:1", "--check-config"], { LLMGW_HEALTH__POLL_INTERVAL_MS: "soon" });
    expect(env.code).toBe(1);
    expect(env.stderr).toStartWith("invalid configuration (LLMGW_HEALTH__POLL_INTERVAL_MS):\n");
    expect(env.stderr).toContain("health.poll_interval_ms: Invalid input: expected number, received string (set by LLMGW_HEALTH__POLL_INTERVAL_MS)");
    expect(env.stderr).not.toContain("(flags)");

    const file = join(tmp, "listen.yaml");
    writeFileSync(file, 'listen: "abc"\nendpoints: [{ id: a, url: "http://127.0.0.1:1" }]\n');
    const bad = await llmgw(["serve", "--config", file, "--check-config"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim().split("\n")).toEqual([`invalid configuration (${file}):`, "  listen: expected HOST:PORT, e.g. 127.0.0.1:8080, got 'abc'"]);
    // The same file with a bad --admin-listen: the flag is named, not the file.
    const flag = await llmgw(["serve", "--config", join(REPO_ROOT, "config", "llmgw.example.yaml"), "--admin-listen", "localhost:99999", "--check-config"]);
    expect(flag.stderr.trim().split("\n")).toEqual([
      "invalid configuration (--admin-listen):",
      "  admin_listen: expected a port of at most 65535 (set by --admin-listen)",
    ]);
  }, 30_000);

  test("--print-config: file, flags, environment and defaults merged, every secret masked", async () => {
    const secrets = {
      key: "sk-plaintext-key-1",
      agent: "agent-token-secret",
      registration: "registration-token-0123",
      redis: "hunter2-redis-pw",
      admin: "admin-token-from-env-01",
    };
    const file = join(tmp, "print.yaml");
    writeFileSync(
      file,
      [
        "health: { poll_interval_ms: 300 }",
        `auth: { keys: [{ key: "${secrets.key}", tenant: team-a }] }`,
        `nodes: [{ name: gpu-01, url: "http://127.0.0.1:7070", token: "${secrets.agent}" }]`,
        `fleet: { registration_token: "${secrets.registration}" }`,
        `state: { backend: redis, redis_url: "redis://:${secrets.redis}@127.0.0.1:6379/0" }`,
        "max_open_streams: 500",
      ].join("\n"),
    );
    const r = await llmgw(["serve", "--config", file, "--listen", "127.0.0.1:8181", "--print-config"], {
      LLMGW_ADMIN_TOKEN: secrets.admin,
      LLMGW_RETRY__MAX_ATTEMPTS: "5",
    });
    expect(r.code).toBe(0);
    for (const s of Object.values(secrets)) expect(r.stdout).not.toContain(s);
    const doc = parseYaml(r.stdout) as {
      listen: string;
      health: { poll_interval_ms: number };
      retry: { max_attempts: number };
      deadlines: { first_token_ms: number };
      max_open_streams: number;
      auth: { keys: { key: string }[] };
      nodes: { token: string }[];
      fleet: Record<string, unknown>;
      state: { redis_url: string };
    };
    expect(doc.listen).toBe("127.0.0.1:8181");
    expect(doc.health.poll_interval_ms).toBe(300);
    expect(doc.retry.max_attempts).toBe(5);
    expect(doc.deadlines.first_token_ms).toBe(60_000);
    expect(doc.max_open_streams).toBe(500);
    expect(doc.auth.keys[0]!.key).toBe("********");
    expect(doc.nodes[0]!.token).toBe("********");
    expect(doc.fleet).toMatchObject({ admin_token: "********", registration_token: "********" });
    expect(doc.state.redis_url).toBe("redis://:********@127.0.0.1:6379/0");
  }, 30_000);

  test("open files: a default start under a low limit is sized to it without a warning; an operator's figure it cannot hold is warned about; SIGTERM ends with 'stopped'", async () => {
    const config = writeGatewayConfig({ data_dir: join(tmp, "nofile-data"), endpoints: [{ id: "e", url: "http://127.0.0.1:1" }] });
    // A limit below what 10000 streams need (lowering it needs no privilege; never above this machine's hard limit).
    const hard = readOpenFilesLimit()?.hard ?? 4096;
    const limit = Math.min(4096, hard);
    const streams = Math.floor((limit - 256) / 2);
    const lowLimit = ["/bin/sh", "-c", `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, CLI];
    const sized = await startLlmgw(["serve", "--config", config], { launcher: lowLimit, waitFor: 2 });
    const lines = sized
      .output()
      .split("\n")
      .filter((l) => l.includes("open files"));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 30,
      hard: limit,
      maxOpenStreams: streams,
      needed: 2 * streams + 256,
      msg: expect.stringContaining(`max_open_streams not set, sized to ${streams}`),
    });
    expect(await sized.stop("SIGTERM")).toBe(0);
    const last = sized.output().trim().split("\n").at(-1)!;
    expect(JSON.parse(last)).toMatchObject({ msg: "stopped", signal: "SIGTERM" });

    const chosen = await startLlmgw(["serve", "--config", config], { launcher: lowLimit, waitFor: 2, env: { LLMGW_MAX_OPEN_STREAMS: "10000" } });
    const warned = chosen
      .output()
      .split("\n")
      .find((l) => l.includes("open files"))!;
    expect(JSON.parse(warned)).toMatchObject({
      level: 40,
      maxOpenStreams: 10_000,
      msg: expect.stringContaining(`the hard limit ${limit} cannot hold max_open_streams 10000`),
    });
    await chosen.stop();
  }, 60_000);
});
