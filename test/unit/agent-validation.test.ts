import { describe, expect, test } from "bun:test";
import type { Fabric, FabricPort } from "../../src/agent/fabric.ts";
import type { GpuView } from "../../src/agent/gpu-health.ts";
import { replicaSpecSchema } from "../../src/agent/replica-spec.ts";
import { type ValidationContext, validateReplica } from "../../src/agent/validation.ts";
import { LlmgwError } from "../../src/shared/errors.ts";

function gpu(index: number, cls = "h100-80g", cc = "9.0", reasons: GpuView["health"]["reasons"] = []): GpuView {
  return {
    index,
    uuid: `GPU-${index}`,
    name: "NVIDIA H100 80GB HBM3",
    class: cls,
    memoryTotalMiB: 81559,
    memoryTotalGiB: 79.65,
    memoryUsedMiB: 0,
    computeCapability: cc,
    utilizationPct: 0,
    eccUncorrectedVolatile: 0,
    eccCorrectedVolatile: 0,
    migEnabled: false,
    health: { ok: reasons.length === 0, reasons, foreignProcesses: [] },
  };
}

function port(p: Partial<FabricPort>): FabricPort {
  return {
    port: 1,
    state: "ACTIVE",
    active: true,
    physState: "LinkUp",
    rate: "400 Gb/sec (4X NDR)",
    rateGbps: 400,
    linkLayer: "InfiniBand",
    transport: "ib",
    gids: [],
    roceGidIndex: null,
    ...p,
  };
}

const fabric: Fabric = {
  island: "fabric",
  adapters: [
    { name: "mlx5_0", ports: [port({})] },
    { name: "mlx5_1", ports: [port({})] },
    { name: "mlx5_2", ports: [port({ state: "DOWN", active: false })] },
    {
      name: "mlx5_3",
      ports: [
        port({
          linkLayer: "Ethernet",
          transport: "roce",
          roceGidIndex: 3,
          gids: [{ index: 3, gid: "0000:0000:0000:0000:0000:ffff:0a00:0005", type: "RoCE v2", netdev: "eth3" }],
        }),
      ],
    },
    { name: "mlx5_4", ports: [port({ linkLayer: "Ethernet", transport: "roce", roceGidIndex: 1, gids: [] })] },
  ],
};

const ctx: ValidationContext = { gpus: [gpu(0), gpu(1), gpu(2), gpu(3)], fabric, others: [] };

function refusal(spec: unknown, c: ValidationContext = ctx): string {
  try {
    validateReplica(replicaSpecSchema.parse(spec), c);
  } catch (err) {
    expect(err).toBeInstanceOf(LlmgwError);
    expect((err as LlmgwError).code).toBe("VALIDATION_FAILED");
    expect((err as LlmgwError).status).toBe(400);
    return (err as LlmgwError).message;
  }
  throw new Error("expected a refusal");
}

const vllm = { engine: "vllm", model: "m" };

describe("replica validation", () => {
  test("a valid spec passes and resolves its fabric ports", () => {
    const f = validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [0, 1], tensorParallel: 2, fabric: { adapters: ["mlx5_0", "mlx5_1"] } }), ctx);
    expect(f?.transport).toBe("ib");
    expect(f?.ports.map((p) => `${p.adapter}:${p.port}`)).toEqual(["mlx5_0:1", "mlx5_1:1"]);
    expect(validateReplica(replicaSpecSchema.parse({ engine: "sim", model: "m" }), ctx)).toBeNull();
  });

  test("GPU indices must exist, be listed once, and not belong to another replica", () => {
    expect(refusal({ ...vllm, gpus: [7] })).toStartWith("gpu-exists: GPU 7 does not exist");
    expect(refusal({ ...vllm, gpus: [1, 1], tensorParallel: 2 })).toStartWith("gpu-duplicate");
    expect(refusal({ ...vllm, gpus: [1] }, { ...ctx, others: [{ id: "r1", gpus: [1], port: 9000 }] })).toStartWith(
      "gpu-in-use: GPU 1 is already used by replica 'r1'",
    );
    expect(refusal({ ...vllm, gpus: [] })).toStartWith("gpus-required");
  });

  test("node × GPU × TP × PP arithmetic", () => {
    expect(refusal({ ...vllm, gpus: [0, 1], tensorParallel: 4 })).toStartWith(
      "parallel-arithmetic: 1 node(s) × 2 GPU(s) = 2, but tensorParallel 4 × pipelineParallel 1 = 4",
    );
    expect(() =>
      validateReplica(
        replicaSpecSchema.parse({
          ...vllm,
          gpus: [0, 1, 2, 3],
          tensorParallel: 4,
          pipelineParallel: 2,
          multiNode: { nnodes: 2, nodeRank: 1, masterAddr: "h" },
        }),
        ctx,
      ),
    ).not.toThrow();
    expect(refusal({ ...vllm, gpus: [0, 1, 2, 3], tensorParallel: 4, multiNode: { nnodes: 2, nodeRank: 0, masterAddr: "h" } })).toStartWith(
      "parallel-arithmetic",
    );
    expect(refusal({ ...vllm, gpus: [0], multiNode: { nnodes: 2, nodeRank: 2, masterAddr: "h" }, tensorParallel: 2 })).toStartWith("multi-node");
  });

  test("no mixed GPU types in a tensor-parallel group", () => {
    const mixed = { ...ctx, gpus: [gpu(0), gpu(1, "a100-sxm4-80g", "8.0")] };
    expect(refusal({ ...vllm, gpus: [0, 1], tensorParallel: 2 }, mixed)).toBe(
      "mixed-gpu-types: a tensor-parallel group needs one GPU type, got 0=h100-80g, 1=a100-sxm4-80g",
    );
  });

  test("fp8 refused below compute capability 8.9 (and when unknown)", () => {
    const ampere = { ...ctx, gpus: [gpu(0, "a100-sxm4-80g", "8.0")] };
    expect(refusal({ ...vllm, gpus: [0], quantization: "fp8" }, ampere)).toStartWith("fp8-compute-capability");
    expect(() => validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [0], quantization: "awq" }), ampere)).not.toThrow();
    expect(() =>
      validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [0], quantization: "fp8" }), { ...ctx, gpus: [gpu(0, "l40s-45g", "8.9")] }),
    ).not.toThrow();
  });

  test("unusable GPUs, taken ports, misplaced options", () => {
    const bad = { ...ctx, gpus: [gpu(0, "h100-80g", "9.0", ["ecc_uncorrected"]), gpu(1, "h100-80g", "9.0", ["foreign_process"])] };
    expect(refusal({ ...vllm, gpus: [0] }, bad)).toBe("gpu-unhealthy: GPU 0 is not usable (ecc_uncorrected)");
    expect(() => validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [1] }), bad)).not.toThrow(); // reported, not refused
    expect(refusal({ ...vllm, gpus: [0], port: 9000 }, { ...ctx, others: [{ id: "r2", gpus: [], port: 9000 }] })).toStartWith("port-in-use");
    expect(refusal({ ...vllm, gpus: [0], startupMs: 10 })).toStartWith("engine-option");
  });

  test("fabric adapters must exist, be ACTIVE, not mix IB with RoCE, and agree on the GID index", () => {
    expect(refusal({ ...vllm, gpus: [0], fabric: { adapters: ["mlx5_9"] } })).toStartWith("fabric-adapter: adapter 'mlx5_9' is not on this node");
    expect(refusal({ ...vllm, gpus: [0], fabric: { adapters: ["mlx5_2"] } })).toStartWith("fabric-adapter: adapter 'mlx5_2' has no ACTIVE");
    expect(refusal({ ...vllm, gpus: [0], fabric: { adapters: ["mlx5_0", "mlx5_3"] } })).toStartWith("fabric-mixed-link-layer");
    expect(refusal({ ...vllm, gpus: [0], fabric: { adapters: ["mlx5_3", "mlx5_4"] } })).toStartWith("roce-gid-index");
    const roce = validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [0], fabric: { adapters: ["mlx5_3"] } }), ctx);
    expect(roce).toEqual({ transport: "roce", ports: [{ adapter: "mlx5_3", port: 1, gidIndex: 3, netdev: "eth3" }], socketIfname: undefined });
  });

  test("a model name or option value can never become a flag", () => {
    expect(refusal({ ...vllm, gpus: [0], model: "--port" })).toBe("model-name: model '--port' starts with '-' and would be read as a flag");
    expect(refusal({ engine: "sim", model: "-m" })).toStartWith("model-name");
    expect(refusal({ ...vllm, gpus: [0], model: "m\n--port 1" })).toStartWith("model-name: model contains control characters");
    expect(refusal({ ...vllm, gpus: [0], quantization: "--host" })).toStartWith("engine-option: quantization '--host'");
    expect(refusal({ ...vllm, gpus: [0, 1], tensorParallel: 2, multiNode: { nnodes: 2, nodeRank: 1, masterAddr: "--port" } })).toStartWith(
      "multi-node: multiNode.masterAddr",
    );
    for (const model of ["meta-llama/Llama-3.1-8B-Instruct", "/models/llama 8b", "Qwen/Qwen2.5-7B-Instruct-AWQ"]) {
      expect(() => validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [0], model }), ctx)).not.toThrow();
    }
  });

  test("extraArgs may not set what the agent owns, in any spelling argparse accepts", () => {
    const owned = [
      ["--port", "9"],
      ["--port=9"],
      ["--po", "9"],
      ["--host", "0.0.0.0"],
      ["--tensor_parallel_size", "8"],
      ["-tp", "8"],
      ["-tp8"],
      ["--served-model-name", "x", "--model", "y"],
    ];
    for (const extraArgs of owned) expect(refusal({ ...vllm, gpus: [0], extraArgs })).toStartWith("engine-args: extraArgs[");
    expect(refusal({ ...vllm, gpus: [0], extraArgs: ["--port", "9"] })).toBe(
      "engine-args: extraArgs[0] '--port' sets --port, which the agent sets from the spec (host, port, model and GPU layout are the agent's)",
    );
    expect(refusal({ engine: "sglang", model: "m", gpus: [0], extraArgs: ["--model-path", "other"] })).toStartWith(
      "engine-args: extraArgs[0] '--model-path' sets --model-path",
    );
    expect(refusal({ engine: "sim", model: "m", extraArgs: ["--startup-ms", "5"] })).toStartWith("engine-args");
    expect(refusal({ ...vllm, gpus: [0], extraArgs: ["other-model"] })).toStartWith("engine-args: extraArgs[0] 'other-model' is not a flag");
    expect(refusal({ ...vllm, gpus: [0], extraArgs: ["--x", "a\u0000b"] })).toStartWith("engine-args: extraArgs[1] contains a control character");
    const fine = ["--max-model-len", "8192", "--enable-lora", "--temperature-offset", "-1", "--served-model-name", "llama", "--portal-url=x"];
    expect(() => validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [0], extraArgs: fine }), ctx)).not.toThrow();
  });

  test("env may not move the GPU assignment or the agent's parent binding", () => {
    for (const key of ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "LLMGW_PARENT_PID"]) {
      expect(refusal({ ...vllm, gpus: [0], env: { [key]: "0" } })).toStartWith(`engine-env: env ${key} is set by the agent`);
    }
    expect(() => validateReplica(replicaSpecSchema.parse({ ...vllm, gpus: [0], env: { NCCL_DEBUG: "INFO", HF_HOME: "/models" } }), ctx)).not.toThrow();
  });

  test("an API key travels by the name of its variable only: set on this agent, never in argv or env, not for SGLang", () => {
    const keyed = { ...ctx, env: { ENGINE_KEY: "sk-1" } };
    expect(validateReplica(replicaSpecSchema.parse({ engine: "sim", model: "m", apiKeyEnv: "ENGINE_KEY" }), keyed)).toBeNull();
    expect(refusal({ engine: "sim", model: "m", apiKeyEnv: "NOT_HERE" }, keyed)).toBe(
      "engine-env: apiKeyEnv: environment variable NOT_HERE is not set or empty on this node's agent",
    );
    expect(refusal({ engine: "sglang", model: "m", gpus: [0], apiKeyEnv: "ENGINE_KEY" }, keyed)).toStartWith("engine-option: apiKeyEnv: SGLang");
    expect(refusal({ ...vllm, gpus: [0], extraArgs: ["--api-key", "sk-1"] })).toStartWith("engine-args: extraArgs[0] sets --api-key");
    expect(refusal({ ...vllm, gpus: [0], extraArgs: ["--api-key=sk-1"] })).toStartWith("engine-args: extraArgs[0] sets --api-key");
    expect(refusal({ ...vllm, gpus: [0], env: { VLLM_API_KEY: "sk-1" } })).toStartWith("engine-env: env VLLM_API_KEY");
  });
});
