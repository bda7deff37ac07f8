/** The simulated GPUs' memory ledger: a sim-engine on an agent's --sim-gpus writes what it holds, and the stand-in nvidia-smi reports it as memory.used. */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Set by an agent with --sim-gpus for the engines it starts: the directory
 * where each sim-engine writes one file named after its pid, a line
 * "<gpu index> <MiB>" per GPU it holds. As on a real GPU, the memory is held
 * while the process lives: the stand-in nvidia-smi skips a file whose pid is
 * gone, so an engine killed without cleaning up frees its GPUs too.
 */
export const SIM_GPU_LEDGER_ENV = "LLMGW_SIM_GPU_LEDGER";

/** The GPU indices CUDA_VISIBLE_DEVICES gives the engine (the agent writes indices); none when unset or not indices. */
export function visibleGpuIndices(cudaVisibleDevices: string | undefined): number[] {
  if (!cudaVisibleDevices) return [];
  const items = cudaVisibleDevices.split(",").map((s) => s.trim());
  return items.every((s) => /^\d+$/.test(s)) ? items.map(Number) : [];
}

/** The ledger file's text: `usedMiB` on each GPU. */
function ledgerText(gpus: readonly number[], usedMiB: number): string {
  return gpus.map((i) => `${i} ${Math.round(usedMiB)}\n`).join("");
}

/** Write this process's hold; returns how to release it (on a clean stop). */
export function holdSimGpus(dir: string, pid: number, gpus: readonly number[], usedMiB: number): () => void {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, String(pid));
  writeFileSync(path, ledgerText(gpus, usedMiB));
  return () => rmSync(path, { force: true });
}
