import type { FastifyReply, onRequestHookHandler } from "fastify";

/**
 * The responses still open, by the name of the token that opened them, so a revoked token's
 * streams (GET /v1/live, and any other response that outlives its request) end when the token
 * does, on every replica: "requests with it get 401 from then on" must hold for a stream opened
 * before the revoke too. A token is checked once, when its request comes in; this is the rest.
 */
export class TokenBoundResponses {
  readonly #open = new Map<string, Set<FastifyReply>>();

  /** An onRequest hook, after bearerAuth: notes each authenticated response until it closes. */
  readonly track: onRequestHookHandler = (request, reply, done) => {
    const name = request.caller?.name;
    if (name === undefined) return done();
    let replies = this.#open.get(name);
    if (replies === undefined) {
      replies = new Set();
      this.#open.set(name, replies);
    }
    const open = replies;
    open.add(reply);
    reply.raw.once("close", () => {
      open.delete(reply);
      if (open.size === 0 && this.#open.get(name) === open) this.#open.delete(name);
    });
    done();
  };

  /**
   * Ends the responses of token `name` that are streaming (their headers are out): a response
   * not yet started is an ordinary request already let in, answered once like one that raced
   * the revoke; the revoke's own request is among them, and must get its answer.
   */
  closeToken(name: string): number {
    let closed = 0;
    for (const reply of this.#open.get(name) ?? []) {
      if (!reply.raw.headersSent) continue;
      reply.log.info({ token: name }, "token revoked: its open stream is closed");
      reply.raw.destroy();
      closed++;
    }
    return closed;
  }
}
