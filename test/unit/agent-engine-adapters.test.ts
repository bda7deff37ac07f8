import { describe, expect, test } from "bun:test";
import { buildLaunchPlan, type LaunchInput } from "../../src/agent/engine-adapters.ts";
import { ncclEnv, type ResolvedFabric } from "../../src/agent/nccl-env.ts";
import { publishesKvEvents, replicaSpecSchema, specFingerprint } from "../../src/agent/replica-spec.ts";

const bins = { vllm: "vllm", python: "python3", bun: "/opt/bun", cli: "/repo/src/cli.ts" };

function input(spec: unknown, extra: Partial<LaunchInput> = {}): LaunchInput {
  return { spec: replicaSpecSchema.parse(spec), port: 8001, host: "10.0.0.5", fabric: null, bins, ...extra };
}

const IB: ResolvedFabric = {
  transport: "ib",
  ports: [
    { adapter: "mlx5_0", port: 1, gidIndex: null, netdev: null },
    { adapter: "mlx5_1", port: 1, gidIndex: null, netdev: null },
  ],
  socketIfname: undefined,
};

describe("vLLM adapter", () => {
  test("single node: serve, parallel sizes, limits, quantization, port; CUDA_VISIBLE_DEVICES", () => {
    const plan = buildLaunchPlan(
      input({
        engine: "vllm",
        model: "meta-llama/Llama-3.1-70B",
        gpus: [2, 3, 4, 5],
        tensorParallel: 4,
        maxNumSeqs: 128,
        gpuMemoryUtilization: 0.9,
        quantization: "fp8",
        extraArgs: ["--max-model-len", "8192"],
      }),
    );
    expect(plan.argv).toEqual([
      "vllm",
      "serve",
      "meta-llama/Llama-3.1-70B",
      "--host",
      "10.0.0.5",
      "--port",
      "8001",
      "--tensor-parallel-size",
      "4",
      "--pipeline-parallel-size",
      "1",
      "--max-num-seqs",
      "128",
      "--gpu-memory-utilization",
      "0.9",
      "--quantization",
      "fp8",
      "--max-model-len",
      "8192",
    ]);
    expect(plan.env).toEqual({ CUDA_VISIBLE_DEVICES: "2,3,4,5", CUDA_DEVICE_ORDER: "PCI_BUS_ID" });
  });

  test("multi-node: rank 0 serves, other ranks run --headless; NCCL gets the exact HCA list", () => {
    const spec = {
      engine: "vllm",
      model: "m",
      gpus: [0, 1, 2, 3, 4, 5, 6, 7],
      tensorParallel: 8,
      pipelineParallel: 2,
      multiNode: { nnodes: 2, nodeRank: 0, masterAddr: "10.0.0.1", masterPort: 29600 },
    };
    const head = buildLaunchPlan(input(spec, { fabric: IB }));
    expect(head.argv.join(" ")).toContain(
      "--tensor-parallel-size 8 --pipeline-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29600",
    );
    expect(head.argv).not.toContain("--headless");
    expect(head.env.NCCL_IB_HCA).toBe("=mlx5_0:1,mlx5_1:1");
    const worker = buildLaunchPlan(input({ ...spec, multiNode: { ...spec.multiNode, nodeRank: 1 } }, { fabric: IB }));
    expect(worker.argv.slice(-9)).toEqual(["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29600", "--headless"]);
  });
});

describe("SGLang adapter", () => {
  test("single node", () => {
    const plan = buildLaunchPlan(
      input({ engine: "sglang", model: "Qwen/Qwen2.5-7B", gpus: [0, 1], tensorParallel: 2, maxNumSeqs: 64, gpuMemoryUtilization: 0.8 }),
    );
    expect(plan.argv).toEqual([
      "python3",
      "-m",
      "sglang.launch_server",
      "--model-path",
      "Qwen/Qwen2.5-7B",
      "--host",
      "10.0.0.5",
      "--port",
      "8001",
      "--tp",
      "2",
      "--max-running-requests",
      "64",
      "--mem-fraction-static",
      "0.8",
    ]);
    expect(plan.env.CUDA_VISIBLE_DEVICES).toBe("0,1");
  });

  test("multi-node: --tp counts every node's GPUs, --dist-init-addr host:port", () => {
    const plan = buildLaunchPlan(
      input({ engine: "sglang", model: "m", gpus: [0, 1], tensorParallel: 4, multiNode: { nnodes: 2, nodeRank: 1, masterAddr: "sgl-dev-0" } }),
    );
    expect(plan.argv.join(" ")).toContain("--tp 4 --nnodes 2 --node-rank 1 --dist-init-addr sgl-dev-0:29500");
  });
});

describe("sim-engine adapter", () => {
  test("bun + src/cli.ts sim-engine with port, model, startup time, GPU count", () => {
    const plan = buildLaunchPlan(input({ engine: "sim", model: "sim-llama", gpus: [0, 1], tensorParallel: 2, startupMs: 1500 }, { host: "127.0.0.1" }));
    expect(plan.argv).toEqual([
      "/opt/bun",
      "/repo/src/cli.ts",
      "sim-engine",
      "--host",
      "127.0.0.1",
      "--port",
      "8001",
      "--model",
      "sim-llama",
      "--startup-ms",
      "1500",
      "--gpus",
      "2",
    ]);
  });

  test("no GPUs: CUDA_VISIBLE_DEVICES is empty (hides every GPU), no --gpus", () => {
    const plan = buildLaunchPlan(input({ engine: "sim", model: "m" }));
    expect(plan.env.CUDA_VISIBLE_DEVICES).toBe("");
    expect(plan.argv).not.toContain("--gpus");
  });

  test("spec env is added last (an operator override wins)", () => {
    const plan = buildLaunchPlan(input({ engine: "sim", model: "m", env: { NCCL_DEBUG: "INFO", CUDA_DEVICE_ORDER: "FASTEST_FIRST" } }));
    expect(plan.env).toMatchObject({ NCCL_DEBUG: "INFO", CUDA_DEVICE_ORDER: "FASTEST_FIRST" });
  });
});

describe("NCCL environment", () => {
  test("exact matching: '=' keeps mlx5_1 from also selecting mlx5_10", () => {
    const env = ncclEnv(IB);
    expect(env.NCCL_IB_HCA).toStartWith("=");
    expect(env.NCCL_IB_HCA?.slice(1).split(",")).toEqual(["mlx5_0:1", "mlx5_1:1"]);
    expect(env.NCCL_IB_GID_INDEX).toBeUndefined();
    expect(env.NCCL_SOCKET_IFNAME).toBeUndefined();
  });

  test("RoCE: GID index and the RoCE netdevs as socket interfaces; an explicit ifname wins", () => {
    const roce: ResolvedFabric = { transport: "roce", ports: [{ adapter: "mlx5_2", port: 1, gidIndex: 3, netdev: "eth2" }], socketIfname: undefined };
    expect(ncclEnv(roce)).toEqual({ NCCL_IB_HCA: "=mlx5_2:1", NCCL_IB_GID_INDEX: "3", NCCL_SOCKET_IFNAME: "=eth2" });
    expect(ncclEnv({ ...roce, socketIfname: "bond0" }).NCCL_SOCKET_IFNAME).toBe("bond0");
    expect(ncclEnv(null)).toEqual({});
  });
});

describe("replica spec", () => {
  test("defaults applied; key order and defaults do not change the fingerprint", () => {
    const a = replicaSpecSchema.parse({ engine: "sim", model: "m" });
    const b = replicaSpecSchema.parse({ model: "m", engine: "sim", tensorParallel: 1, gpus: [], extraArgs: [] });
    expect(a).toMatchObject({ gpus: [], tensorParallel: 1, pipelineParallel: 1, extraArgs: [], env: {} });
    expect(specFingerprint(a)).toBe(specFingerprint(b));
    expect(specFingerprint(replicaSpecSchema.parse({ engine: "sim", model: "m", startupMs: 5 }))).not.toBe(specFingerprint(a));
  });

  test("unknown keys and bad values are refused", () => {
    expect(replicaSpecSchema.safeParse({ engine: "sim", model: "m", tp: 2 }).success).toBe(false);
    expect(replicaSpecSchema.safeParse({ engine: "trt", model: "m" }).success).toBe(false);
    expect(replicaSpecSchema.safeParse({ engine: "vllm", model: "m", gpus: [-1] }).success).toBe(false);
    expect(replicaSpecSchema.safeParse({ engine: "vllm", model: "m", gpuMemoryUtilization: 1.5 }).success).toBe(false);
  });
});

describe("KV-cache events", () => {
  const kvEvents = { port: 5557, replayPort: 5558, topic: "kv@r1@m" };
  const config = '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"kv@r1@m"}';

  test("vLLM and the sim-engine get --kv-events-config on the allocated ports, bound on every interface", () => {
    const vllm = buildLaunchPlan(input({ engine: "vllm", model: "m", gpus: [0], extraArgs: ["--max-model-len", "8192"] }, { kvEvents }));
    expect(vllm.argv.slice(-4)).toEqual(["--kv-events-config", config, "--max-model-len", "8192"]);
    const sim = buildLaunchPlan(input({ engine: "sim", model: "m" }, { kvEvents }));
    expect(sim.argv.slice(-2)).toEqual(["--kv-events-config", config]);
    expect(buildLaunchPlan(input({ engine: "vllm", model: "m", gpus: [0] })).argv).not.toContain("--kv-events-config");
  });

  test("published by vLLM and the sim unless turned off; not by SGLang, nor by a headless vLLM rank", () => {
    expect(publishesKvEvents(replicaSpecSchema.parse({ engine: "vllm", model: "m" }))).toBe(true);
    expect(publishesKvEvents(replicaSpecSchema.parse({ engine: "sim", model: "m" }))).toBe(true);
    expect(publishesKvEvents(replicaSpecSchema.parse({ engine: "sim", model: "m", kvEvents: false }))).toBe(false);
    expect(publishesKvEvents(replicaSpecSchema.parse({ engine: "sglang", model: "m" }))).toBe(false);
    const mn = { nnodes: 2, nodeRank: 1, masterAddr: "10.0.0.1" };
    expect(publishesKvEvents(replicaSpecSchema.parse({ engine: "vllm", model: "m", multiNode: mn }))).toBe(false);
    expect(publishesKvEvents(replicaSpecSchema.parse({ engine: "vllm", model: "m", multiNode: { ...mn, nodeRank: 0 } }))).toBe(true);
    // A spec without the field keeps the fingerprint it had before the field existed.
    expect(specFingerprint(replicaSpecSchema.parse({ engine: "vllm", model: "m" }))).not.toContain("kvEvents");
  });
});
