/** Zod building blocks shared by the config schemas (gateway and fleet) and the management API. */
import { z } from "zod";
import { modelNameProblem, quotedName } from "../shared/model-name.ts";

export const httpUrl = z.string().refine(
  (s) => {
    try {
      const u = new URL(s);
      return u.protocol === "http:" || u.protocol === "https:";
    } catch {
      return false;
    }
  },
  { message: "expected an http(s) URL" },
);

/** Endpoint, pool, tenant and node names: file-name and label safe. */
export const id = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, {
  message: "expected an id of letters, digits, '.', '_' or '-' (at most 63)",
});

/** A model, alias or adapter name: printable, no whitespace, at most MODEL_NAME_MAX_CHARS (src/shared/model-name.ts has the rule and why). */
export const modelName = z.string().superRefine((name, ctx) => {
  const problem = modelNameProblem(name);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: `expected a model name: ${quotedName(name)} ${problem}` });
});
