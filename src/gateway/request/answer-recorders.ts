/**
 * What must see a request's answer on its way out: the idempotency record and
 * the response cache each wrap the Response (the same bytes, recorded as they
 * are relayed). Gates add their wrapper; the pipeline passes every answer —
 * errors included, which records nothing and frees an idempotency key —
 * through them, innermost first.
 */
type AnswerWrapper = (res: Response) => Response;

export class AnswerRecorders {
  #wrappers: AnswerWrapper[] | undefined;

  add(wrap: AnswerWrapper): void {
    (this.#wrappers ??= []).push(wrap);
  }

  /** The answer as the client gets it: the last wrapper added is applied first (the cache's `miss` header is on what the idempotency record sees, which keeps no such header). */
  wrap(res: Response): Response {
    const w = this.#wrappers;
    if (w === undefined) return res;
    for (let i = w.length - 1; i >= 0; i--) res = w[i]!(res);
    return res;
  }
}
