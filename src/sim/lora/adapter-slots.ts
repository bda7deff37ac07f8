/**
 * The engine worker's two adapter caches, as vLLM's LRUCacheWorkerLoRAManager
 * keeps them (vllm/lora/worker_manager.py, vllm/lora/models.py): host memory
 * holds up to `max_cpu_loras` adapters, least recently used evicted first;
 * `max_loras` GPU slots hold the adapters a batch runs with, a new one taking
 * the least recently used slot. Pure: it counts what each activation costs
 * and leaves the clock to the engine.
 */

/** An adapter as the worker knows it: its id and what loading it costs. */
export interface SlotAdapter {
  readonly id: number;
  /** ms to copy it from host memory into a GPU slot. */
  readonly swapMs: number;
  /** ms to read it from disk into host memory. */
  readonly diskMs: number;
}

interface SlotStats {
  /** Adapters copied into a GPU slot (each one a swap; vLLM logs "Activating LoRA"). */
  gpuLoads: number;
  /** Adapters read from disk into host memory (at registration, or again after eviction). */
  diskLoads: number;
  /** Simulated ms spent on both. */
  loadMs: number;
}

/** A Map used as an LRU set: insertion order is recency, re-inserting touches. */
class LruIds {
  private readonly ids = new Map<number, true>();
  constructor(readonly capacity: number) {}
  has(id: number): boolean {
    return this.ids.has(id);
  }
  touch(id: number): void {
    this.ids.delete(id);
    this.ids.set(id, true);
  }
  /** Add (touching) `id`; the evicted id when full, else undefined. */
  add(id: number, keep?: ReadonlySet<number>): number | undefined {
    if (this.ids.has(id)) {
      this.touch(id);
      return undefined;
    }
    let evicted: number | undefined;
    if (this.ids.size >= this.capacity) {
      for (const old of this.ids.keys()) {
        if (keep?.has(old)) continue;
        evicted = old;
        break;
      }
      if (evicted !== undefined) this.ids.delete(evicted);
    }
    this.ids.set(id, true);
    return evicted;
  }
  delete(id: number): void {
    this.ids.delete(id);
  }
  list(): number[] {
    return [...this.ids.keys()];
  }
}

export class AdapterSlots {
  readonly stats: SlotStats = { gpuLoads: 0, diskLoads: 0, loadMs: 0 };
  private readonly cpu: LruIds;
  private readonly gpu: LruIds;

  constructor(maxLoras: number, maxCpuLoras: number) {
    if (maxCpuLoras < maxLoras) throw new RangeError(`max_cpu_loras (${maxCpuLoras}) must be >= max_loras (${maxLoras})`);
    this.gpu = new LruIds(maxLoras);
    this.cpu = new LruIds(maxCpuLoras);
  }

  /**
   * Load into host memory (add_lora: registration, or a request's adapter
   * evicted since); ms it takes. Host memory holds every adapter on the GPU
   * too, so one evicted from it leaves its GPU slot (vLLM's LRU cache
   * deactivates what it removes); `keep` (a batch's own adapters) stays.
   */
  addToHost(a: SlotAdapter, keep?: ReadonlySet<number>): number {
    if (this.cpu.has(a.id)) {
      this.cpu.touch(a.id);
      return 0;
    }
    const evicted = this.cpu.add(a.id, keep);
    if (evicted !== undefined) this.gpu.delete(evicted);
    this.stats.diskLoads++;
    this.stats.loadMs += a.diskMs;
    return a.diskMs;
  }

  /**
   * The adapters a step's batch runs with (at most max_loras distinct, the
   * scheduler sees to it): each one not in a GPU slot is brought there,
   * from disk first when host memory lost it. Returns the ms this adds.
   */
  activate(adapters: readonly SlotAdapter[]): number {
    let ms = 0;
    const needed = new Set(adapters.map((a) => a.id));
    for (const a of adapters) {
      if (this.gpu.has(a.id)) {
        this.gpu.touch(a.id);
        this.cpu.touch(a.id);
        continue;
      }
      ms += this.addToHost(a, needed);
      this.gpu.add(a.id, needed);
      this.stats.gpuLoads++;
      this.stats.loadMs += a.swapMs;
      ms += a.swapMs;
    }
    return ms;
  }

  /** remove_lora: the adapter leaves both caches. */
  remove(id: number): void {
    this.gpu.delete(id);
    this.cpu.delete(id);
  }

  /** Adapter ids in GPU slots, least recently used first. */
  onGpu(): number[] {
    return this.gpu.list();
  }

  /** Adapter ids in host memory, least recently used first. */
  inHost(): number[] {
    return this.cpu.list();
  }
}
