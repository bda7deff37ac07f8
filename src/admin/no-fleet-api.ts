/**
 * The management API's paths on a gateway that runs no fleet manager: every
 * call there is answered with what is missing, so `llmgw ctl` says "this
 * gateway runs no fleet manager" instead of "no route GET …".
 */
import { Elysia } from "elysia";
import { FLEET_API_PREFIX } from "../control/fleet-api-schemas.ts";
import { errorResponse, LlmgwError } from "../shared/errors.ts";

const NO_FLEET_MESSAGE =
  "this gateway runs no fleet manager: its configuration has no nodes:, fleet.models, fleet.admin_token (LLMGW_ADMIN_TOKEN) or fleet.registration_token";

export function noFleetApi() {
  const answer = () => errorResponse(new LlmgwError("NOT_FOUND", NO_FLEET_MESSAGE));
  // Hidden from the OpenAPI document: these are not routes, only their absence explained.
  return new Elysia({ name: "llmgw-no-fleet" })
    .all(FLEET_API_PREFIX, answer, { detail: { hide: true } })
    .all(`${FLEET_API_PREFIX}/*`, answer, { detail: { hide: true } });
}
