/** The SimHttpError a sim request parser throws, for tests that check vLLM's status, type and message. */
import { SimHttpError } from "../../src/sim/vllm-errors.ts";

export function simErrorOf(fn: () => unknown): SimHttpError {
  try {
    fn();
  } catch (e) {
    if (e instanceof SimHttpError) return e;
    throw e;
  }
  throw new Error("expected a SimHttpError");
}
