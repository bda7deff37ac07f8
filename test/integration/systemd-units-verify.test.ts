/**
 * The units in deploy/systemd, checked by systemd itself: `systemd-analyze
 * verify` reports no unknown or malformed setting (it only warns, so any
 * output fails) and an executable ExecStart; `systemd-analyze security`
 * keeps each unit's exposure under a bar. Paths under /opt/llmgw are pointed
 * at this checkout so ExecStart can be checked for real.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

const UNITS = { "llmgw.service": 3.5, "llmgw-agent.service": 8.5 } as const;
const tmp = mkdtempSync(join(tmpdir(), "systemd-units-"));

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function unitText(name: string): string {
  return readFileSync(join(REPO_ROOT, "deploy", "systemd", name), "utf8");
}

/** The unit with /opt/llmgw pointed at this checkout, in a temp directory. */
function localUnit(name: string): string {
  const path = join(tmp, name);
  writeFileSync(path, unitText(name).replaceAll("/opt/llmgw", REPO_ROOT));
  return path;
}

async function run(argv: string[]): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe", env: { ...process.env, SYSTEMD_PAGER: "", SYSTEMD_COLORS: "0" } });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: out + err };
}

describe("deploy/systemd units", () => {
  for (const [name, maxExposure] of Object.entries(UNITS)) {
    testWithTool(
      "systemd-analyze",
      `${name}: verify is silent, exposure at most ${maxExposure}`,
      async (tool) => {
        const path = localUnit(name);
        const verify = await run([tool, "verify", "--man=no", path]);
        expect(verify).toEqual({ code: 0, out: "" });
        const security = await run([tool, "security", "--offline=yes", "--no-pager", `--threshold=${maxExposure * 10}`, path]);
        expect(security.out).toContain(`Overall exposure level for ${name}`);
        expect(security.code).toBe(0);
      },
      60_000,
    );
  }

  test("both units start Bun through the exec launcher and stop their whole cgroup", () => {
    for (const name of Object.keys(UNITS)) {
      const text = unitText(name);
      expect(text).toMatch(/^ExecStart=\/opt\/llmgw\/bin\/llmgw /m);
      expect(text).toMatch(/^KillMode=control-group$/m);
      expect(text).toMatch(/^NoNewPrivileges=yes$/m);
    }
  });

  test("systemctl reload llmgw sends the gateway SIGHUP (a live config reload), not a restart", () => {
    expect(unitText("llmgw.service")).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
  });
});
