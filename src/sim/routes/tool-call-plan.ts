/** One choice's forced tool call (routes/tool-calls.ts makes it; the answer plan and the sinks carry it). */
export interface ToolCallPlan {
  /** The chat API's call id (chatcmpl-tool-…); the Responses API's call_id. */
  id: string;
  /** The Responses API's item id (fc_…); chat does not use it. */
  itemId: string;
  name: string;
  /** The arguments (a JSON object) in the pieces they stream in, one per token. */
  pieces: string[];
  /** vLLM's finish_reason for the call: "tool_calls" when required, the engine's ("stop") for a named function. */
  finish: "tool_calls" | "stop";
}
