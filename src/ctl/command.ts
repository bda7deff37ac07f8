/** `llmgw ctl`: operator CLI against the admin listener (nodes, GPUs, cordon, drain). */
import { notBuiltCommand } from "../cli/not-built.ts";

export const ctlCommand = notBuiltCommand(
  "ctl",
  "Operator CLI against a gateway's admin listener.",
  "the control plane (node registry, placement, cordon and drain) does not exist yet.",
);
