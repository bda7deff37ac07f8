/**
 * The stand-in nvidia-smi of simulated nodes, read by the agent's real GPU
 * discovery (healthy H100s, utilisation absent rather than 0, memory used
 * as the engines on each GPU hold it, unknown fields refused as a driver
 * refuses them), and the stream check of the fleet
 * bench's load: only a stream ending in [DONE] with no error event is ok.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { discoverGpus } from "../../src/agent/gpu-discovery.ts";
import { SIM_H100, simNvidiaSmiScript, writeSimNvidiaSmi } from "../../src/agent/sim-nvidia-smi.ts";
import { streamDefect, summarize } from "../../src/bench/checked-stream-load.ts";
import { gpuClass } from "../../src/shared/gpu-class.ts";
import { holdSimGpus, visibleGpuIndices } from "../../src/shared/sim-gpu-ledger.ts";

const tmp = mkdtempSync(join(tmpdir(), "sim-nvidia-smi-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("simulated nvidia-smi", () => {
  test("the agent's discovery finds N healthy H100 80GB with distinct UUIDs and no utilisation", async () => {
    const path = writeSimNvidiaSmi(join(tmp, "a"), { ...SIM_H100, count: 3, uuidTag: "q7" });
    const d = await discoverGpus(path);
    expect(d.note).toBeUndefined();
    expect(d.droppedFields).toEqual([]);
    expect(d.computeApps).toEqual([]);
    expect(
      d.gpus.map((g) => [g.index, g.uuid, gpuClass(g.name, g.memoryTotalMiB), g.computeCapability, g.eccUncorrectedVolatile, g.migEnabled, g.utilizationPct]),
    ).toEqual([
      [0, "GPU-q7-0000-0000-0000-000000000000", "h100-80g", "9.0", 0, false, undefined],
      [1, "GPU-q7-0000-0000-0000-000000000001", "h100-80g", "9.0", 0, false, undefined],
      [2, "GPU-q7-0000-0000-0000-000000000002", "h100-80g", "9.0", 0, false, undefined],
    ]);
  });

  test("an unknown field is refused the way a driver refuses it (exit 2, the field named)", () => {
    const path = writeSimNvidiaSmi(join(tmp, "b"), { ...SIM_H100, count: 1, uuidTag: "x" });
    const r = Bun.spawnSync([path, "--query-gpu=index,clocks.max.sm", "--format=csv,noheader,nounits"]);
    expect(r.exitCode).toBe(2);
    expect(r.stdout.toString()).toContain('Field "clocks.max.sm" is not a valid field to query.');
  });

  test("a simulated GPU reports the memory its running engines hold, and frees it when they are gone", async () => {
    const ledgerDir = join(tmp, "c", "held");
    const path = writeSimNvidiaSmi(join(tmp, "c"), { ...SIM_H100, count: 3, uuidTag: "m", ledgerDir });
    const used = async () => (await discoverGpus(path)).gpus.map((g) => g.memoryUsedMiB);
    expect(await used()).toEqual([0, 0, 0]);
    // This test's own process stands in for a running engine on GPUs 0 and 2; a dead one's hold on GPU 1 is ignored.
    const release = holdSimGpus(ledgerDir, process.pid, visibleGpuIndices("0,2"), 73_403);
    const dead = Bun.spawnSync(["true"]).pid;
    holdSimGpus(ledgerDir, dead, [1], 40_000);
    expect(await used()).toEqual([73_403, 0, 73_403]);
    release();
    expect(await used()).toEqual([0, 0, 0]);
  });

  test("a UUID tag that would break the script is refused", () => {
    expect(() => simNvidiaSmiScript({ ...SIM_H100, count: 1, uuidTag: "a'; rm -rf /" })).toThrow(RangeError);
  });
});

describe("stream checks", () => {
  const chunk = (content: string) => `data: {"choices":[{"delta":{"content":"${content}"}}]}\n\n`;

  test("a stream ending in [DONE] without an error event is whole", () => {
    expect(streamDefect(`${chunk("a")}${chunk("b")}data: [DONE]\n\n`)).toBeUndefined();
  });

  test("a cut stream, or one that carries the gateway's error event before [DONE], is not", () => {
    expect(streamDefect(`${chunk("a")}${chunk("b")}`)).toMatch(/^truncated: 2 events/);
    expect(streamDefect("")).toMatch(/^truncated: 0 events/);
    const errored = `${chunk("a")}data: {"error":{"message":"the engine ended the stream without [DONE]","code":"UPSTREAM_STREAM_TRUNCATED"}}\n\ndata: [DONE]\n\n`;
    expect(streamDefect(errored)).toMatch(/^error event: .*UPSTREAM_STREAM_TRUNCATED/);
    // Text that merely mentions "error" is content, not an error event.
    expect(streamDefect(`${chunk('say \\"error\\"')}data: [DONE]\n\n`)).toBeUndefined();
  });

  test("the summary counts non-200s and broken streams apart, and ok requests per endpoint", () => {
    const base = { sentAt: 0, endedAt: 1 };
    const s = summarize([
      { ...base, ok: true, status: 200, endpoint: "e1" },
      { ...base, ok: true, status: 200, endpoint: "e1" },
      { ...base, ok: true, status: 200, endpoint: "e2" },
      { ...base, ok: false, status: 503, endpoint: undefined, failure: "HTTP 503" },
      { ...base, ok: false, status: 200, endpoint: "e2", failure: "truncated: 3 events" },
    ]);
    expect(s).toEqual({ requests: 5, ok: 3, non200: 1, broken: 1, byEndpoint: { e1: 2, e2: 1 }, firstFailures: ["HTTP 503", "truncated: 3 events"] });
  });
});
