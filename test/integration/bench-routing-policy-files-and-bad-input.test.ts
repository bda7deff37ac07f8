/**
 * `llmgw bench routing` and its policy files: a policy that wires its
 * engines into the gateway (engine flags, and an endpoint template naming a
 * listener each engine announces) runs; bad input — flags, a policy file the
 * gateway would refuse, a template naming a listener no engine announces —
 * gets a clear message and exit 2, before or instead of a run.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RoutingReport } from "../../src/bench/routing/routing-report.ts";
import { runBench } from "../helpers/bench-json.ts";

const dir = mkdtempSync(join(tmpdir(), "routing-policies-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const routing = (args: string[]) => runBench(["routing", ...args]);

/** A small run: 2 pods, one short stage, no warm-up. */
const SMALL = ["--pods", "2", "--rates", "40", "--stage-s", "1", "--warmup-s", "0", "--drain-s", "20"];

test("a policy file wires each engine's announced listener into its endpoint entry (here its DCGM exporter)", async () => {
  writeFileSync(
    join(dir, "with-dcgm.yaml"),
    [
      "description: default scheduling, each endpoint watching its engine's GPU",
      "engine_args: --gpus 1 --dcgm-port 0",
      "endpoint:",
      '  dcgm_url: "{engine.dcgm}/metrics"',
      "",
    ].join("\n"),
  );
  const r = await routing([...SMALL, "--policy-dir", dir, "--policies", "with-dcgm", "--json"]);
  expect({ code: r.code, err: r.code === 0 ? "" : r.stderr.slice(-1500) }).toEqual({ code: 0, err: "" });
  const report = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as RoutingReport;
  const p = report.policies[0]!;
  expect(p.name).toBe("with-dcgm");
  expect(p.source).toBe(join(dir, "with-dcgm.yaml"));
  expect(p.figures.answered).toBe(p.figures.requests);
  expect(p.figures.requests).toBeGreaterThan(10);
  expect(report.target).toBeNull(); // no random, no default in this run
}, 90_000);

test("bad flags, a policy the gateway would refuse, a template naming a listener no engine announces: exit 2 and why", async () => {
  const bad = mkdtempSync(join(dir, "bad-"));
  writeFileSync(join(bad, "fastest.yaml"), "description: d\ngateway:\n  scheduling:\n    picker: fastest\n");
  const unannounced = mkdtempSync(join(dir, "unannounced-"));
  writeFileSync(join(unannounced, "events.yaml"), 'description: d\nendpoint:\n  dcgm_url: "{engine.kv-events}"\n');
  const cases: [string[], string][] = [
    [["--rates", "60,0"], "--rates: expected positive numbers"],
    [["--rates", "60,80,100", "--stage-s", "1,2"], "--stage-s: expected one length, or one per rate (3), got 2"],
    [["--policies", "random,clairvoyant"], "--policies: unknown policy 'clairvoyant' (known: random, round-robin, load,"],
    [["--pods", "0"], "--pods: expected an integer in [1, 64]"],
    [["--workload", "nope"], "--workload: expected one of shared-prefix, lora, got 'nope'"],
    [["--policy-dir", join(dir, "nowhere")], "cannot read"],
    [["--policy-dir", bad], "fastest.yaml: the gateway would refuse it: scheduling.picker"],
    [[...SMALL, "--policy-dir", unannounced], "events.yaml): the endpoint template names {engine.kv-events}, which engine sim-"],
    [[...SMALL, "--policies", "random", "--engine-args=--no-such-flag 1"], "sim-engine refused its flags"],
  ];
  for (const [args, message] of cases) {
    const r = await routing(args);
    const said = r.stderr.includes(message)
      ? message
      : r.stderr
          .split("\n")
          .filter((l) => l.trim() !== "")
          .slice(-3)
          .join(" | ");
    expect({ args, code: r.code, said }).toEqual({ args, code: 2, said: message });
  }
}, 120_000);
