import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT } from "../helpers/processes.ts";

async function llmgw(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, CLI, ...args], { cwd: REPO_ROOT, env: childEnv(env), stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

describe("llmgw CLI", () => {
  test("no command prints usage and exits 2; --help exits 0", async () => {
    const none = await llmgw([]);
    expect(none.code).toBe(2);
    expect(none.stdout).toContain("usage: llmgw <command>");
    const help = await llmgw(["--help"]);
    expect(help.code).toBe(0);
  });

  test("an unknown command or flag prints usage and exits 2", async () => {
    const cmd = await llmgw(["frobnicate"]);
    expect(cmd.code).toBe(2);
    expect(cmd.stderr).toContain("unknown command 'frobnicate'");
    const flag = await llmgw(["serve", "--frobnicate"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("usage: llmgw serve");
  });

  test("every command has --help", async () => {
    for (const cmd of ["serve", "agent", "ctl", "sim-engine", "bench", "demo"]) {
      const r = await llmgw([cmd, "--help"]);
      expect({ cmd, code: r.code }).toEqual({ cmd, code: 0 });
      expect(r.stdout).toContain("usage: llmgw");
    }
  });

  test("ctl with no gateway to talk to says so and exits 4", async () => {
    const r = await llmgw(["ctl", "nodes", "--gateway", "http://127.0.0.1:1"]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("cannot reach the gateway at http://127.0.0.1:1");
  });

  test("serve --check-config names the bad key and exits 1; a good file exits 0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-cfg-"));
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "endpoints:\n  - id: a\n    url: http://h:1\n  - id: b\n    url: http://h:2\n  - id: c\n    url: not-a-url\n");
    const r = await llmgw(["serve", "--config", bad, "--check-config"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("endpoints[2].url: expected an http(s) URL");
    const ok = await llmgw(["serve", "--config", join(REPO_ROOT, "config", "llmgw.example.yaml"), "--check-config"]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain("configuration OK");
  });

  test("serve with a fleet and no endpoint: --check-config says the fleet runs; nothing to serve, or an unusable data_dir, exits 1", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-cfg-"));
    const fleetOnly = join(dir, "fleet.yaml");
    writeFileSync(
      fleetOnly,
      `data_dir: ${join(dir, "data")}\nnodes:\n  - { name: gpu-01, url: "http://127.0.0.1:1", token: t }\nfleet:\n  models: [{ name: m, engine: sim, replicas: 1 }]\n`,
    );
    const ok = await llmgw(["serve", "--config", fleetOnly, "--check-config"]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain("configuration OK: 0 endpoint(s)");
    expect(ok.stdout).toContain("fleet on: 1 configured node(s), 1 desired model(s), management writes off (no admin.token or fleet.admin_token)");
    expect(existsSync(join(dir, "data"))).toBe(false); // checking creates nothing

    const nothing = join(dir, "nothing.yaml");
    writeFileSync(nothing, "log_level: info\n");
    const none = await llmgw(["serve", "--config", nothing, "--check-config"]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("nothing to serve");

    writeFileSync(join(dir, "a-file"), "");
    const unusable = join(dir, "unusable.yaml");
    writeFileSync(unusable, readFileSync(fleetOnly, "utf8").replace(`data_dir: ${join(dir, "data")}`, `data_dir: ${join(dir, "a-file", "data")}`));
    const check = await llmgw(["serve", "--config", unusable, "--check-config"]);
    expect(check.code).toBe(1);
    expect(check.stderr).toContain(`data_dir: ${join(dir, "a-file", "data")} cannot be created: ${join(dir, "a-file")} is not a directory`);
    const serve = await llmgw(["serve", "--config", unusable, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toContain("is not a directory");
    rmSync(dir, { recursive: true, force: true });
  });

  test("a bad LLMGW_* override fails the check with its key path", async () => {
    const r = await llmgw(["serve", "--upstream", "http://127.0.0.1:1", "--check-config"], { LLMGW_RETRY__MAX_ATTEMPTS: "lots" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("retry.max_attempts:");
  });
});
