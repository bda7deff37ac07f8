/** How an attempt reaches an engine — the dial check and the request itself — as the attempt path takes them (fakes in an in-process test). */
import type { DialGuard } from "./dial-guard.ts";

/** The request to the engine: global fetch in the gateway. */
export type UpstreamFetch = (url: string, init: RequestInit) => Promise<Response>;

/** The dial check before an engine that has not answered recently (dial-guard.ts). */
export type UpstreamDial = Pick<DialGuard, "isRecent" | "check" | "markOk">;
