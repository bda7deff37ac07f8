/** Types of traffic.js (plain JavaScript served to the page as is). */
import type { DashboardSnapshot } from "./snapshot.ts";

export type TrafficSample = Pick<DashboardSnapshot, "at" | "traffic">;

export function windowEnds<T extends TrafficSample>(samples: readonly T[], windowMs: number): { first: T; last: T } | null;
export function requestRate(a: TrafficSample, b: TrafficSample): number | null;
export function errorRatio(a: TrafficSample, b: TrafficSample): number | null;
export function ttftQuantile(a: TrafficSample, b: TrafficSample, q: number): number | null;
export function tokenRate(a: TrafficSample, b: TrafficSample): number | null;
export function firstResponseQuantile(a: TrafficSample, b: TrafficSample, q: number): { value: number; kind: "ttft" | "headers" } | null;
