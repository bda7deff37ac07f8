/**
 * The sim-engine's LoRA adapters, end to end: the API server's registry of
 * adapters by name (vLLM's OpenAIServingModels.lora_requests, listed in
 * /v1/models with their parent), the worker's host-memory and GPU-slot
 * caches (adapter-slots.ts), what loading costs the engine's steps
 * (load-cost.ts), and `vllm:lora_requests_info` (lora-metric.ts). The engine
 * core calls it each step (CoreLora); the server's routes call load/unload.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { CoreLora } from "../engine-core.ts";
import type { AdapterCard } from "../openai-response.ts";
import type { SeqAdapter, Sequence } from "../sequence.ts";
import { type PromptTokens, rekeyPrompt } from "../tokens.ts";
import { SimHttpError } from "../vllm-errors.ts";
import type { WaitQueue } from "../wait-queue.ts";
import { AdapterSlots, type SlotAdapter } from "./adapter-slots.ts";
import { adapterBytes, diskLoadMs, swapMs } from "./load-cost.ts";
import type { LoraModuleSpec, SimLoraSettings } from "./lora-config.ts";
import { LoraRequestsInfo } from "./lora-metric.ts";

interface SimAdapter extends SeqAdapter, SlotAdapter {
  readonly path: string;
  /** The served model it adapts (its `parent` in /v1/models). */
  readonly parent: string;
  readonly rank: number;
  readonly bytes: number;
}

/**
 * The adapter's rank: `r` of its adapter_config.json when the path holds
 * one (PEFT's layout), else max_lora_rank — the sim serves adapters it does
 * not have, so any path is accepted.
 */
function adapterRank(path: string, maxRank: number): number {
  let r: unknown;
  try {
    r = (JSON.parse(readFileSync(join(path, "adapter_config.json"), "utf8")) as { r?: unknown }).r;
  } catch {
    return maxRank;
  }
  if (typeof r !== "number" || !Number.isInteger(r) || r < 1) return maxRank;
  // vLLM refuses it when it loads the adapter (vllm/lora/models.py).
  if (r > maxRank) throw new SimHttpError(400, "BadRequestError", `LoRA rank ${r} is greater than max_lora_rank ${maxRank}.`);
  return r;
}

/**
 * A prompt's block hashes for a request with an adapter: vLLM keys the
 * prefix cache by the LoRA too (the adapter's name is an extra key of every
 * block hash, vllm/v1/core/kv_cache_utils.py), so two adapters, or an
 * adapter and its base, never share blocks, and the blocks its answer fills
 * are keyed the same way.
 */
export function saltedForAdapter(prompt: PromptTokens, adapter: SeqAdapter, blockSize: number): PromptTokens {
  return rekeyPrompt(prompt, blockSize, { lora: adapter.name });
}

export class EngineLora implements CoreLora {
  readonly metric: LoraRequestsInfo;
  private readonly slots: AdapterSlots;
  private readonly byName = new Map<string, SimAdapter>();
  /** Every adapter ever registered, by id: a request keeps its adapter after an unload. */
  private readonly byId = new Map<number, SimAdapter>();
  private nextId = 1;
  /** Disk loads made between steps (add_lora runs on the engine's loop): the next step waits for them. */
  private pendingMs = 0;

  constructor(
    readonly settings: SimLoraSettings,
    private readonly served: readonly string[],
    /** Whether the engine has work: a load made while it idles delays no step. */
    private readonly busy: () => boolean = () => true,
  ) {
    this.slots = new AdapterSlots(settings.maxLoras, settings.maxCpuLoras);
    this.metric = new LoraRequestsInfo(settings.maxLoras);
    // Static modules load at start (init_static_loras), before the engine serves.
    for (const m of settings.modules) this.register(m, false);
  }

  get maxLoras(): number {
    return this.settings.maxLoras;
  }

  /** The adapter a request names as its model, if it is one. */
  resolve(model: string): SimAdapter | undefined {
    return this.byName.get(model);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** /v1/load_lora_adapter (also --lora-modules at start). Throws SimHttpError with vLLM's answers. */
  load(name: string, path: string, loadInplace = false, baseModelName?: string): SimAdapter {
    if (!name || !path) throw new SimHttpError(400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.");
    const existing = this.byName.get(name);
    if (existing && !loadInplace) {
      throw new SimHttpError(
        400,
        "InvalidUserInput",
        `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
      );
    }
    if (existing) this.slots.remove(existing.id);
    return this.register({ name, path, ...(baseModelName !== undefined ? { baseModelName } : {}) }, true, existing?.id);
  }

  /** /v1/unload_lora_adapter: gone from the list and both caches (requests already running keep theirs). */
  unload(name: string): void {
    if (!name) throw new SimHttpError(400, "InvalidUserInput", "'lora_name' needs to be provided to unload a LoRA adapter.");
    const a = this.byName.get(name);
    if (!a) throw new SimHttpError(404, "NotFoundError", `The lora adapter '${name}' cannot be found.`);
    this.byName.delete(name);
    this.slots.remove(a.id);
  }

  /** The adapters for /v1/models, in the order they were loaded. */
  cards(): AdapterCard[] {
    return [...this.byName.values()].map((a) => ({ id: a.name, root: a.path, parent: a.parent }));
  }

  // ——— CoreLora ———

  stepLoadMs(seqs: readonly Sequence[]): number {
    const adapters: SimAdapter[] = [];
    const seen = new Set<number>();
    for (const s of seqs) {
      const ref = s.req.adapter;
      if (!ref || seen.has(ref.id)) continue;
      seen.add(ref.id);
      const a = this.byId.get(ref.id);
      if (a) adapters.push(a);
    }
    const ms = this.pendingMs + (adapters.length > 0 ? this.slots.activate(adapters) : 0);
    this.pendingMs = 0;
    return ms;
  }

  observe(running: readonly Sequence[], waiting: WaitQueue): void {
    const run = new Set<string>();
    for (const s of running) if (s.req.adapter) run.add(s.req.adapter.name);
    const wait = new Set<string>();
    waiting.forEachLive((s) => {
      if (s.req.adapter) wait.add(s.req.adapter.name);
    });
    this.metric.record([...run], [...wait]);
  }

  /** For /sim/state: the caches and what loading has cost (adapter loads are what routing saves). */
  state(): Record<string, unknown> {
    const nameOf = (id: number) => this.byId.get(id)?.name ?? String(id);
    const st = this.slots.stats;
    return {
      max_loras: this.settings.maxLoras,
      max_cpu_loras: this.settings.maxCpuLoras,
      max_lora_rank: this.settings.maxLoraRank,
      runtime_updates: this.settings.runtimeUpdates,
      registered: [...this.byName.values()].map((a) => ({
        name: a.name,
        id: a.id,
        path: a.path,
        parent: a.parent,
        rank: a.rank,
        bytes: Math.round(a.bytes),
        swap_ms: a.swapMs,
        disk_ms: a.diskMs,
      })),
      on_gpu: this.slots.onGpu().map(nameOf),
      in_host: this.slots.inHost().map(nameOf),
      gpu_loads: st.gpuLoads,
      disk_loads: st.diskLoads,
      load_ms: st.loadMs,
    };
  }

  private register(m: LoraModuleSpec, runtime: boolean, keepId?: number): SimAdapter {
    const s = this.settings;
    const rank = adapterRank(m.path, s.maxLoraRank);
    const parent = m.baseModelName !== undefined && this.served.includes(m.baseModelName) ? m.baseModelName : (this.served[0] ?? "");
    const a: SimAdapter = {
      id: keepId ?? this.nextId++,
      name: m.name,
      path: m.path,
      parent,
      rank,
      bytes: adapterBytes(s.cost, rank),
      swapMs: swapMs(s.cost, rank),
      diskMs: diskLoadMs(s.cost, rank),
    };
    this.byName.set(a.name, a);
    this.byId.set(a.id, a);
    // add_lora reads it into host memory at once ("this will also preload it").
    const ms = this.slots.addToHost(a);
    if (runtime && this.busy()) this.pendingMs += ms;
    return a;
  }
}
