/**
 * The LoRA adapters the gateway knows of, on the main thread: which
 * endpoints list each one in /v1/models and with which base (its `parent`),
 * the fleet's declared adapters (a base and adapters it may load where
 * demand is), and the id the health worker numbered each name with — the
 * index of the bitmaps in the shared LoRA table both choosers read. A
 * request naming an adapter is routed among the endpoints of its base,
 * with the adapter's id.
 */
import type { ListedAdapter } from "../protocol/health-messages.ts";

/** An id no adapter has: a name the health worker has not numbered is registered nowhere. */
export const UNNUMBERED_ADAPTER = -1;

interface AdapterRoute {
  /** The model the endpoints serve. */
  base: string;
  /** The adapter's id in the shared table; UNNUMBERED_ADAPTER when no engine has reported it yet. */
  id: number;
}

export class AdapterCatalog {
  private readonly ids = new Map<string, number>();
  /** When a request last named each adapter (the fleet's demand signal). */
  private readonly lastRequest = new Map<string, number>();
  /** Requests waiting for an adapter to be listed somewhere (a fleet load in progress). */
  private readonly waiters = new Map<string, Set<(listed: boolean) => void>>();
  private readonly byEndpoint = new Map<number, readonly ListedAdapter[]>();
  private readonly declared = new Map<string, string>();
  /** adapter → base, rebuilt after a change. */
  private bases: Map<string, string> | undefined;

  /** Names the health worker numbered. */
  setIds(pairs: readonly (readonly [string, number])[]): void {
    for (const [name, id] of pairs) this.ids.set(name, id);
  }

  /** What an endpoint's /v1/models lists; true when it changed. */
  setEndpoint(index: number, adapters: readonly ListedAdapter[]): boolean {
    const prev = this.byEndpoint.get(index);
    if (prev && prev.length === adapters.length && prev.every((a, i) => a.name === adapters[i]!.name && a.parent === adapters[i]!.parent)) return false;
    this.byEndpoint.set(
      index,
      adapters.map((a) => ({ ...a })),
    );
    this.bases = undefined;
    for (const a of adapters) {
      const waiting = this.waiters.get(a.name);
      if (!waiting) continue;
      this.waiters.delete(a.name);
      for (const resolve of waiting) resolve(true);
    }
    return true;
  }

  removeEndpoint(index: number): void {
    if (this.byEndpoint.delete(index)) this.bases = undefined;
  }

  /** Adapters the fleet declares, by base (replaces the previous declaration). */
  setDeclared(adapters: readonly { name: string; base: string }[]): void {
    this.declared.clear();
    for (const a of adapters) this.declared.set(a.name, a.base);
    this.bases = undefined;
  }

  private baseMap(): Map<string, string> {
    if (!this.bases) {
      const m = new Map<string, string>(this.declared);
      for (const list of this.byEndpoint.values()) for (const a of list) if (!m.has(a.name)) m.set(a.name, a.parent);
      this.bases = m;
    }
    return this.bases;
  }

  /** How to route a request naming `name`, when it is an adapter. */
  route(name: string): AdapterRoute | undefined {
    const base = this.baseMap().get(name);
    return base === undefined ? undefined : { base, id: this.ids.get(name) ?? UNNUMBERED_ADAPTER };
  }

  isAdapter(name: string): boolean {
    return this.baseMap().has(name);
  }

  /** The fleet declares it (it may be loaded on demand). */
  isDeclared(name: string): boolean {
    return this.declared.has(name);
  }

  /** Some endpoint lists it now. */
  listedAnywhere(name: string): boolean {
    for (const list of this.byEndpoint.values()) if (list.some((a) => a.name === name)) return true;
    return false;
  }

  noteRequest(name: string, now: number): void {
    this.lastRequest.set(name, now);
  }

  lastRequestAt(name: string): number | undefined {
    return this.lastRequest.get(name);
  }

  waitingForLoad(name: string): number {
    return this.waiters.get(name)?.size ?? 0;
  }

  /** Resolves true once an endpoint lists `name`, false after `timeoutMs` or when `signal` aborts. */
  whenListed(name: string, signal: AbortSignal, timeoutMs: number): Promise<boolean> {
    if (this.listedAnywhere(name)) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      let set = this.waiters.get(name);
      if (!set) this.waiters.set(name, (set = new Set()));
      const done = (listed: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        set!.delete(done);
        if (set!.size === 0 && this.waiters.get(name) === set) this.waiters.delete(name);
        resolve(listed);
      };
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      signal.addEventListener("abort", onAbort, { once: true });
      set.add(done);
    });
  }

  /** Slots of the endpoints listing `name` now. */
  endpointsListing(name: string): number[] {
    const out: number[] = [];
    for (const [index, list] of this.byEndpoint) if (list.some((a) => a.name === name)) out.push(index);
    return out;
  }

  /** The adapters an endpoint lists. */
  of(index: number): readonly ListedAdapter[] {
    return this.byEndpoint.get(index) ?? [];
  }

  /** Every known adapter with its base, for GET /v1/models. */
  listed(): { id: string; parent: string }[] {
    return [...this.baseMap()].map(([id, parent]) => ({ id, parent }));
  }
}
