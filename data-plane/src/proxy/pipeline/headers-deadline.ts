/**
 * Who times an attempt's wait for response headers (routes' timeouts.headersMs): undici, or the
 * pipeline's deadline sweep (send-to-node.ts).
 *
 * undici keeps one timer per connection and switches it from the headers timeout to the body
 * timeout when the headers arrive. With equal values it refreshes the timer; with different ones
 * (the defaults: 15 s and 30 s) it clears it and allocates another at every response, on top of
 * the one every request starts with (an idle connection's keep-alive timer is of another kind).
 * So for a request without a body, undici gets the body timeout for both phases, and the shorter
 * headersMs is kept by the sweep, which holds one timer per duration for all requests in flight:
 * one undici timer per request instead of two.
 *
 * Only without a request body: undici restarts its headers timer when it finished writing a body,
 * an instant the pipeline does not see. Only when the body timeout is off (0) or longer than
 * headersMs: undici's timer, then set to it, can never fire before headersMs.
 */
export function sweepKeepsHeadersDeadline(
  headersMs: number,
  bodyMs: number,
  hasBody: boolean,
): boolean {
  return !hasBody && headersMs > 0 && (bodyMs === 0 || bodyMs > headersMs);
}
