/** Bearer tokens compared in constant time (sha-256 of both sides, so lengths leak nothing either). */
import { createHash, timingSafeEqual } from "node:crypto";

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | null): string | null {
  const m = header === null ? null : /^Bearer\s+(.+)$/i.exec(header.trim());
  return m?.[1] ?? null;
}

/** Constant-time comparison of the presented bearer token with ours. */
export function tokenMatches(header: string | null, token: string): boolean {
  const presented = bearerToken(header);
  if (presented === null) return false;
  return timingSafeEqual(digest(presented), digest(token));
}
