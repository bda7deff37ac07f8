/** Gate: a live key with a model allow-list asks only for those models (403 MODEL_NOT_ALLOWED otherwise), checked once the body names the model and before anything is charged. */
import { LlmgwError } from "../../shared/errors.ts";
import { quotedName } from "../../shared/model-name.ts";
import type { Principal } from "../api-keys.ts";

/**
 * `requested` is the name the client sent, `model` what it resolved to (an
 * alias's target): either on the list allows it, so an operator may list
 * the alias clients use or the model behind it.
 */
export function keyModelsGate(principal: Principal | undefined, requested: string, model: string): void {
  const allowed = principal?.key?.models;
  if (allowed === undefined || allowed.has(requested) || allowed.has(model)) return;
  throw new LlmgwError("MODEL_NOT_ALLOWED", `This API key may not use the model ${quotedName(requested)}. Ask the gateway's operator for access.`, {
    param: "model",
  });
}
