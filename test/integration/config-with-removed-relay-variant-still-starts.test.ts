/**
 * Scenario: an operator upgrades llmgw and keeps a config that still sets
 * `relay_variant` (removed: the SSE relay has one transport). The gateway
 * starts, logs one warning saying the key is ignored, and relays a streamed
 * answer to the end; `serve --check-config` accepts the file with the same
 * warning.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { readSse, startGateway, startSim } from "../helpers/cluster.ts";
import { CLI, REPO_ROOT, stopAll } from "../helpers/processes.ts";

afterAll(stopAll);

describe("a config that still sets relay_variant", () => {
  test("serve starts with a warning that the key is ignored, and streams an answer through the one relay", async () => {
    const sim = await startSim(["--model", "m", "--itl-ms", "1", "--prefill-overhead-ms", "1"]);
    // "event" was the slowest of the removed transports: the file need not be edited to start.
    const gw = await startGateway({ relay_variant: "event", endpoints: [{ id: "sim", url: sim.api, models: ["m"] }] }, 1);
    const warnings = gw
      .output()
      .split("\n")
      .filter((l) => l.includes("relay_variant"))
      .map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, msg: expect.stringContaining("relay_variant: removed, its value is ignored") });
    const res = await fetch(`${gw.api}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", stream: true, max_tokens: 5, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    expect(events.filter((e) => e !== "[DONE]" && (JSON.parse(e) as { choices: unknown[] }).choices.length > 0).length).toBeGreaterThanOrEqual(5);
  }, 60_000);

  test("serve --check-config accepts the file and prints the warning", async () => {
    const config = writeGatewayConfig({ relay_variant: "chunk", endpoints: [{ id: "e", url: "http://127.0.0.1:1" }] });
    const proc = Bun.spawn([process.execPath, CLI, "serve", "--config", config, "--check-config"], {
      cwd: REPO_ROOT,
      env: childEnv({ NO_COLOR: "1" }),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ code, stdout: stdout.startsWith("configuration OK") }).toEqual({ code: 0, stdout: true });
    expect(stderr).toContain("warning: relay_variant: removed, its value is ignored");
  }, 30_000);
});
