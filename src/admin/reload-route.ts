/** POST /admin/v1/reload: re-read the config file and apply what can change live (an admin write: the admin token is required). */
import { Elysia } from "elysia";
import { z } from "zod";
import type { ReloadOutcome } from "../config/reload-plan.ts";
import { LlmgwError } from "../shared/errors.ts";

export const RELOAD_PATH = "/admin/v1/reload";

/** What a reload applied; an invalid file or a refused change answers in the error shape, naming the cause. */
export const reloadAppliedSchema = z.object({
  result: z.literal("ok"),
  /** Live keys that changed (wire form, dotted). */
  changed: z.array(z.string()),
  endpoints: z.object({ added: z.array(z.string()), removed: z.array(z.string()), changed: z.array(z.string()) }),
});

const NO_RELOAD_MESSAGE = "this gateway cannot reload its configuration: it was not started by llmgw serve (no file or flags to read again)";

export function reloadRoute(reload: ((trigger: "admin") => Promise<ReloadOutcome>) | undefined) {
  return new Elysia({ name: "llmgw-reload" }).post(
    RELOAD_PATH,
    async () => {
      // Thrown: the admin app answers an LlmgwError in the error shape.
      if (reload === undefined) throw new LlmgwError("CONFLICT", NO_RELOAD_MESSAGE);
      const outcome = await reload("admin");
      // 422: the file does not validate; 409: it does, but changes what only a restart can.
      if (outcome.result === "invalid") throw new LlmgwError("VALIDATION_FAILED", outcome.message);
      if (outcome.result === "refused") throw new LlmgwError("CONFLICT", outcome.message);
      return { result: outcome.result, changed: [...outcome.changed], endpoints: outcome.endpoints };
    },
    {
      response: { 200: reloadAppliedSchema },
      detail: {
        summary: "Re-read the configuration file and apply what can change live (as SIGHUP does)",
        description:
          "Needs `Authorization: Bearer <admin token>`. 200: applied. 422 VALIDATION_FAILED: the file is invalid; 409 CONFLICT: a key that needs a restart changed (named in the message). Either way the running configuration stays.",
      },
    },
  );
}
