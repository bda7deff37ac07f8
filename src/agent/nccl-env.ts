/**
 * NCCL environment for the fabric a replica was given. NCCL_IB_HCA matches
 * by prefix unless the list starts with "=" (NCCL docs, "NCCL_IB_HCA"):
 * `mlx5_1` would also select `mlx5_10`…`mlx5_17`, so the list is always
 * exact (`=mlx5_0:1,mlx5_1:1`). RoCE needs NCCL_IB_GID_INDEX; the bootstrap
 * socket interface goes in NCCL_SOCKET_IFNAME.
 */
import type { Transport } from "./fabric.ts";

interface ResolvedFabricPort {
  adapter: string;
  port: number;
  gidIndex: number | null;
  netdev: string | null;
}

export interface ResolvedFabric {
  transport: Exclude<Transport, "other">;
  ports: ResolvedFabricPort[];
  socketIfname: string | undefined;
}

export function ncclEnv(fabric: ResolvedFabric | null): Record<string, string> {
  if (!fabric || fabric.ports.length === 0) return {};
  const env: Record<string, string> = {
    NCCL_IB_HCA: `=${fabric.ports.map((p) => `${p.adapter}:${p.port}`).join(",")}`,
  };
  if (fabric.transport === "roce") {
    const gid = fabric.ports[0]?.gidIndex;
    if (gid !== null && gid !== undefined) env.NCCL_IB_GID_INDEX = String(gid);
  }
  let ifname = fabric.socketIfname;
  if (ifname === undefined && fabric.transport === "roce") {
    // The RoCE netdevs carry IP already; use them (exactly) for NCCL's bootstrap too.
    const devs = [...new Set(fabric.ports.map((p) => p.netdev).filter((d): d is string => d !== null))];
    if (devs.length > 0) ifname = `=${devs.join(",")}`;
  }
  if (ifname !== undefined) env.NCCL_SOCKET_IFNAME = ifname;
  return env;
}
