/** Seeded randomness (the fleet twin, the sim-engine's noise): the same seed gives the same numbers in any process on any host. */

import { sfc32 } from "./sfc32.ts";

/** A uniform number in [0, 1) per call, from `seed` (sfc32 seeded through splitmix32). */
export function seededUnit(seed: number): () => number {
  let s = seed >>> 0;
  const split = () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  // sfc32 (a 32-bit seed would give it too little state to start from), each word from splitmix32.
  const next = sfc32(split(), split(), split(), split());
  return () => next() / 4_294_967_296;
}

/** A fresh 32-bit seed, for a run that names none (say which was drawn, so the run can be drawn again). */
export function randomSeed(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0]!;
}
