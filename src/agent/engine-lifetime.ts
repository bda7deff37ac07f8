/**
 * Whether engines live and die with their agent ("bound", the default) or
 * outlive it for the next agent to adopt ("detached",
 * --keep-engines-on-exit). A bound engine is started through util-linux
 * `setpriv --pdeathsig TERM`, so the kernel sends it SIGTERM the moment the
 * agent dies, even by SIGKILL or the OOM killer: no engine is left holding
 * GPUs and ports with nobody supervising it. Engines handle SIGTERM by
 * stopping their own workers (vLLM, SGLang, the sim-engine).
 */

type EngineLifetime = "bound" | "detached";

export interface EngineBinding {
  lifetime: EngineLifetime;
  /** Put before the engine's argv (setpriv exec's the engine: same pid, same command line in /proc). */
  prefix: readonly string[];
  /** Set in the engine's environment; LLMGW_PARENT_PID is never inherited from the agent's own parent. */
  env: Readonly<Record<string, string>>;
  /** Why an engine may still outlive the agent here; null when nothing to say. */
  warning: string | null;
}

/** The variable llmgw processes watch for their parent (src/shared/parent-binding.ts). */
const PARENT_PID_VAR = "LLMGW_PARENT_PID";

export function engineBinding(lifetime: EngineLifetime, setpriv: string | null, agentPid: number): EngineBinding {
  if (lifetime === "detached") return { lifetime, prefix: [], env: {}, warning: null };
  return {
    lifetime,
    prefix: setpriv === null ? [] : [setpriv, "--pdeathsig", "TERM", "--"],
    // The sim-engine (an llmgw process) also watches this pid itself: a fallback where setpriv is missing.
    env: { [PARENT_PID_VAR]: String(agentPid) },
    warning:
      setpriv === null
        ? "setpriv (util-linux) not found: a vLLM or SGLang engine will outlive an agent killed with SIGKILL (the next agent adopts it; under systemd, KillMode=control-group stops it)"
        : null,
  };
}

/** The environment an engine starts with: the agent's, minus its parent binding, plus the binding's and the plan's. */
export function engineEnv(
  agentEnv: Readonly<Record<string, string | undefined>>,
  binding: EngineBinding,
  planEnv: Readonly<Record<string, string>>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(agentEnv)) if (v !== undefined && k !== PARENT_PID_VAR) env[k] = v;
  return Object.assign(env, binding.env, planEnv);
}
