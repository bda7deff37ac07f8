/**
 * Token-block keys: the gateway's own name for a run of prompt tokens, the
 * same whatever hash algorithm an engine uses for its blocks
 * (prefix_caching_hash_algo, a per-process random root): key_j is wyhash of
 * the j-th 16 token ids, seeded with key_{j-1} (a fixed seed for j = 0),
 * reduced to 53 bits. Equal key_j means equal tokens 0..16(j+1)-1 (barring
 * collisions). Both sides compute them: the KV-events worker from the token
 * ids each BlockStored carries, the main thread from the request's ids.
 * An engine block of 16·m tokens is m keys. Pure.
 */

/** Tokens per key: vLLM's default block size, and a divisor of its larger ones (32, 64, 128). */
export const INDEX_BLOCK_TOKENS = 16;
/** Seed of key 0 ("lmgwkv"), fixed so that every gateway and worker computes the same keys. */
export const TOKEN_KEY_ROOT = 0x6c6d67776b76;

const MASK_53 = (1n << 53n) - 1n;
const scratch = new Int32Array(INDEX_BLOCK_TOKENS);
const scratchBytes = new Uint8Array(scratch.buffer);

/** The key of 16 tokens `ids[from .. from+16)` following the key `parent`. */
export function nextTokenKey(parent: number, ids: ArrayLike<number>, from: number): number {
  for (let i = 0; i < INDEX_BLOCK_TOKENS; i++) scratch[i] = ids[from + i]!;
  return Number(Bun.hash.wyhash(scratchBytes, BigInt(parent)) & MASK_53);
}

/**
 * The keys of the whole 16-token runs of `ids` from the start (a trailing
 * partial run has none), at most `maxKeys` of them, chained from
 * TOKEN_KEY_ROOT.
 */
export function tokenBlockKeys(ids: ArrayLike<number>, maxKeys = Number.POSITIVE_INFINITY): number[] {
  const n = Math.min(Math.floor(ids.length / INDEX_BLOCK_TOKENS), maxKeys);
  const out = new Array<number>(n);
  let key = TOKEN_KEY_ROOT;
  for (let j = 0; j < n; j++) {
    key = nextTokenKey(key, ids, j * INDEX_BLOCK_TOKENS);
    out[j] = key;
  }
  return out;
}
