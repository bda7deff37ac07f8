/**
 * One-shot timers as a dependency, so that a module which sets them can run
 * on the wall clock (the gateway) or on a virtual one (the fleet twin's
 * event queue). The real timers never keep the process alive.
 */
export interface Timers {
  set(run: () => void, ms: number): TimerHandle;
  clear(handle: TimerHandle | undefined): void;
}

/** What `set` returns: only `clear` reads it. */
export type TimerHandle = object;

export const REAL_TIMERS: Timers = {
  set(run, ms) {
    const t = setTimeout(run, ms);
    t.unref?.();
    return t;
  },
  clear(handle) {
    if (handle !== undefined) clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};
