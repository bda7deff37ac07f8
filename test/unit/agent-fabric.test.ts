import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { discoverFabric, parsePortState, parseRateGbps, pickRoceGidIndex } from "../../src/agent/fabric.ts";
import { unpackTtar } from "../fixtures/agent/fake-tools.ts";
import { sharedFixture } from "../helpers/fixtures.ts";

const tmp = mkdtempSync(join(tmpdir(), "agent-fabric-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function sampleTree(name: string): string {
  const root = join(tmp, name);
  unpackTtar(sharedFixture("sysfs-class-infiniband__procfs-fixtures-excerpt.ttar"), root, "fixtures/sys/class/infiniband");
  return root;
}

function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    const path = join(dir, rel);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, content);
  }
}

describe("sysfs attribute parsing", () => {
  test("state, rate", () => {
    expect(parsePortState("4: ACTIVE\n")).toBe("ACTIVE");
    expect(parsePortState("1: DOWN")).toBe("DOWN");
    expect(parseRateGbps("400 Gb/sec (4X NDR)\n")).toBe(400);
    expect(parseRateGbps("2.5 Gb/sec (1X SDR)")).toBe(2.5);
    expect(parseRateGbps("garbage")).toBeNull();
  });

  test("RoCE GID choice: RoCE v2 with an IPv4-mapped address first", () => {
    const gids = [
      { index: 0, gid: "fe80:0000:0000:0000:0a00:00ff:fe00:0001", type: "IB/RoCE v1", netdev: "eth2" },
      { index: 1, gid: "fe80:0000:0000:0000:0a00:00ff:fe00:0001", type: "RoCE v2", netdev: "eth2" },
      { index: 3, gid: "0000:0000:0000:0000:0000:ffff:0a00:0005", type: "RoCE v2", netdev: "eth2" },
    ];
    expect(pickRoceGidIndex(gids)).toBe(3);
    expect(pickRoceGidIndex(gids.slice(0, 2))).toBe(1);
    expect(pickRoceGidIndex(gids.slice(0, 1))).toBeNull();
  });
});

describe("fabric discovery from /sys/class/infiniband", () => {
  test("the procfs sample: hfi1_0, mlx4_0 (2 ports) and mlx5_0, all InfiniBand and ACTIVE", () => {
    const f = discoverFabric(sampleTree("sample"));
    expect(f.adapters.map((a) => a.name)).toEqual(["hfi1_0", "mlx4_0", "mlx5_0"]);
    const mlx4 = f.adapters.find((a) => a.name === "mlx4_0")!;
    expect(mlx4.ports.map((p) => p.port)).toEqual([1, 2]);
    expect(mlx4.ports[0]).toMatchObject({
      state: "ACTIVE",
      active: true,
      physState: "LinkUp",
      rate: "40 Gb/sec (4X QDR)",
      rateGbps: 40,
      linkLayer: "InfiniBand",
      transport: "ib",
      roceGidIndex: null,
    });
    // port 2's link_layer has a trailing blank line in the sample
    expect(mlx4.ports[1]?.linkLayer).toBe("InfiniBand");
    expect(f.adapters.find((a) => a.name === "mlx5_0")?.ports[0]).toMatchObject({ rateGbps: 25, transport: "ib", active: true });
    expect(f.adapters.find((a) => a.name === "hfi1_0")?.ports[0]?.rateGbps).toBe(100);
    expect(f.island).toBe("fabric");
  });

  test("a RoCE adapter and a down port added to the sample", () => {
    const root = sampleTree("roce");
    writeFiles(join(root, "mlx5_1", "ports", "1"), {
      state: "4: ACTIVE\n",
      phys_state: "5: LinkUp\n",
      rate: "400 Gb/sec (4X NDR)\n",
      link_layer: "Ethernet\n",
      "gids/0": "fe80:0000:0000:0000:0a00:00ff:fe00:0001\n",
      "gids/1": "fe80:0000:0000:0000:0a00:00ff:fe00:0001\n",
      "gids/2": "0000:0000:0000:0000:0000:ffff:0a00:0005\n",
      "gids/3": "0000:0000:0000:0000:0000:ffff:0a00:0005\n",
      "gids/4": "0000:0000:0000:0000:0000:0000:0000:0000\n",
      "gid_attrs/types/0": "IB/RoCE v1\n",
      "gid_attrs/types/1": "RoCE v2\n",
      "gid_attrs/types/2": "IB/RoCE v1\n",
      "gid_attrs/types/3": "RoCE v2\n",
      "gid_attrs/ndevs/0": "eth2\n",
      "gid_attrs/ndevs/1": "eth2\n",
      "gid_attrs/ndevs/2": "eth2\n",
      "gid_attrs/ndevs/3": "eth2\n",
    });
    writeFiles(join(root, "mlx5_2", "ports", "1"), {
      state: "1: DOWN\n",
      phys_state: "3: Disabled\n",
      rate: "10 Gb/sec (4X SDR)\n",
      link_layer: "InfiniBand\n",
    });
    const f = discoverFabric(root);
    const roce = f.adapters.find((a) => a.name === "mlx5_1")!.ports[0]!;
    expect(roce).toMatchObject({ transport: "roce", linkLayer: "Ethernet", rateGbps: 400, active: true, roceGidIndex: 3 });
    expect(roce.gids.map((g) => g.index)).toEqual([0, 1, 2, 3]); // the zero GID is left out
    expect(roce.gids[3]).toEqual({ index: 3, gid: "0000:0000:0000:0000:0000:ffff:0a00:0005", type: "RoCE v2", netdev: "eth2" });
    const down = f.adapters.find((a) => a.name === "mlx5_2")!.ports[0]!;
    expect(down).toMatchObject({ state: "DOWN", active: false, physState: "Disabled", transport: "ib" });
  });

  test("no /sys/class/infiniband: no adapters, a single-node island, no error", () => {
    expect(discoverFabric(join(tmp, "nothing-here"))).toEqual({ adapters: [], island: "single-node" });
  });

  test("only down ports: still a single-node island", () => {
    const root = join(tmp, "down-only");
    writeFiles(join(root, "mlx5_0", "ports", "1"), { state: "1: DOWN\n", link_layer: "InfiniBand\n" });
    const f = discoverFabric(root);
    expect(f.adapters).toHaveLength(1);
    expect(f.island).toBe("single-node");
  });
});
