/**
 * A stand-in `nvidia-smi` for simulated GPU nodes (`llmgw agent --sim-gpus`,
 * `llmgw demo --fleet`, `llmgw bench fleet`): writes a POSIX sh script that
 * answers the agent's `--query-gpu=… --format=csv,noheader,nounits` for N
 * identical healthy GPUs, and an empty `--query-compute-apps`. The agent
 * runs it like the real one and then places sim-engines on "GPUs" a laptop
 * does not have. memory.used is what the sim-engines running on a GPU hold,
 * from the ledger they write (src/shared/sim-gpu-ledger.ts). A field the script
 * does not know is refused as an old driver refuses it (exit 2).
 */
import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

interface SimGpus {
  count: number;
  /** As the driver names the card, e.g. "NVIDIA H100 80GB HBM3". */
  name: string;
  memoryMiB: number;
  /** e.g. "9.0" */
  computeCap: string;
  /** Distinguishes this node's UUIDs from another's (letters and digits). */
  uuidTag: string;
  /** The ledger directory sim-engines write what they hold into (absent: memory.used is always 0). */
  ledgerDir?: string;
}

/** The H100 80GB as nvidia-smi reports it (81,559 MiB: class h100-80g). */
export const SIM_H100: Omit<SimGpus, "count" | "uuidTag"> = { name: "NVIDIA H100 80GB HBM3", memoryMiB: 81_559, computeCap: "9.0" };

function shellWord(s: string): string {
  return `'${s.replaceAll("'", `'"'"'`)}'`;
}

/** The script's text (exported for its test). */
export function simNvidiaSmiScript(g: SimGpus): string {
  if (!/^[A-Za-z0-9]+$/.test(g.uuidTag)) throw new RangeError(`uuidTag: letters and digits only, got '${g.uuidTag}'`);
  return `#!/bin/sh
# llmgw simulated node: ${g.count} x ${g.name} (written by src/agent/sim-nvidia-smi.ts)
q=""
for a in "$@"; do
  case "$a" in
    --query-compute-apps=*) exit 0 ;;
    --query-gpu=*) q="\${a#--query-gpu=}" ;;
  esac
done
if [ -z "$q" ]; then echo "simulated nvidia-smi: only --query-gpu and --query-compute-apps"; exit 0; fi
ledger=${shellWord(g.ledgerDir ?? "")}
# MiB held on GPU $1: the ledger's lines for it, from engines still running (a file per pid).
used() {
  u=0
  [ -n "$ledger" ] || { echo 0; return; }
  for f in "$ledger"/*; do
    [ -f "$f" ] || continue
    kill -0 "\${f##*/}" 2>/dev/null || continue
    while read -r gi mib; do
      [ "$gi" = "$1" ] && u=$((u + mib))
    done < "$f"
  done
  [ "$u" -gt ${g.memoryMiB} ] && u=${g.memoryMiB}
  echo "$u"
}
i=0
while [ "$i" -lt ${g.count} ]; do
  line=""
  rest="$q,"
  while [ -n "$rest" ]; do
    f="\${rest%%,*}"
    rest="\${rest#*,}"
    case "$f" in
      index) v="$i" ;;
      uuid) v="GPU-${g.uuidTag}-0000-0000-0000-00000000000$i" ;;
      name) v=${shellWord(g.name)} ;;
      memory.total) v=${g.memoryMiB} ;;
      memory.used) v=$(used "$i") ;;
      compute_cap) v=${shellWord(g.computeCap)} ;;
      ecc.errors.uncorrected.volatile.total|ecc.errors.corrected.volatile.total) v=0 ;;
      mig.mode.current) v=Disabled ;;
      utilization.gpu) v="[N/A]" ;; # nothing measures a simulated GPU: absent, not 0
      *) echo "Field \\"$f\\" is not a valid field to query."; echo; exit 2 ;;
    esac
    line="\${line:+$line, }$v"
  done
  echo "$line"
  i=$((i + 1))
done
`;
}

/** Write `<dir>/nvidia-smi` for these GPUs; returns its path. */
export function writeSimNvidiaSmi(dir: string, g: SimGpus): string {
  if (g.count > MAX_SIM_GPUS) throw new RangeError(`at most ${MAX_SIM_GPUS} simulated GPUs per node`);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, "nvidia-smi");
  if (g.ledgerDir) mkdirSync(g.ledgerDir, { recursive: true });
  writeFileSync(path, simNvidiaSmiScript(g));
  chmodSync(path, 0o755);
  return path;
}

/** Most simulated GPUs one node may have (the script numbers UUIDs with one digit). */
export const MAX_SIM_GPUS = 10;

/** A UUID tag that differs between nodes: from the agent's state directory, one per node. */
export function simUuidTag(stateDir: string): string {
  return createHash("sha256").update(stateDir).digest("hex").slice(0, 8);
}
