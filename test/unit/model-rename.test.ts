import { describe, expect, test } from "bun:test";
import { ModelRename } from "../../src/gateway/request/model-rename.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const apply = (r: ModelRename, s: string) => dec.decode(r.apply(enc.encode(s)));

describe("an answer's model as the client asked for it", () => {
  const r = new ModelRename("my-model");
  test("the envelope's model of a chunk, a usage chunk and a JSON answer is replaced, the rest untouched", () => {
    expect(apply(r, 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fallback-7b","choices":[{"delta":{"content":"hi"}}]}\n\n')).toBe(
      'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"my-model","choices":[{"delta":{"content":"hi"}}]}\n\n',
    );
    expect(apply(r, 'data: {"id": "c", "model" : "x\\"y", "choices": [], "usage": {"prompt_tokens": 1}}\n\n')).toBe(
      'data: {"id": "c", "model" : "my-model", "choices": [], "usage": {"prompt_tokens": 1}}\n\n',
    );
    expect(apply(r, '{"object":"list","data":[{"embedding":[0.1]}],"model":"emb"}')).toBe('{"object":"list","data":[{"embedding":[0.1]}],"model":"my-model"}');
  });

  test("a model named inside the text is not touched; an event without a model passes as it is", () => {
    const text = 'data: {"choices":[{"delta":{"content":"the \\"model\\": \\"x\\""}}],"model":"f"}\n\n';
    expect(apply(r, text)).toBe('data: {"choices":[{"delta":{"content":"the \\"model\\": \\"x\\""}}],"model":"my-model"}\n\n');
    const none = enc.encode('data: {"choices":[]}\n\n');
    expect(r.apply(none)).toBe(none);
  });
});
