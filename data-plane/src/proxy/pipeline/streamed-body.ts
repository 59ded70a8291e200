import type { IncomingMessage } from "node:http";
import type { CompiledRoute } from "../../compiler/compiled-types.js";
import { limitedBody } from "../../policy/limited-body.js";
import { ReplayableBody } from "../../retry/replayable-body.js";

/**
 * A body of unknown length (chunked, or HTTP/2 without content-length) as it goes upstream,
 * streamed. It has no length for the body-limit policy to check, so it is cut at the first byte
 * past the route's maxBodyBytes instead; on a retrying route it stays replayable while what was
 * read of it fits `replayLimitBytes` (ReplayableBody's default when undefined).
 *
 * `rewrite` (include_usage added at the end of a large JSON body, stream-usage.ts) stands
 * between the two: the limit counts the client's bytes, and a replay sends the rewritten ones,
 * so the rewrite runs once however many attempts there are.
 */
export function streamedBody(
  source: IncomingMessage | AsyncGenerator<Uint8Array>,
  route: CompiledRoute,
  replayLimitBytes: number | undefined,
  rewrite?: (body: AsyncIterable<Uint8Array>) => AsyncGenerator<Uint8Array>,
): IncomingMessage | AsyncGenerator<Uint8Array> | ReplayableBody {
  const limited = route.maxBodyBytes > 0 ? limitedBody(source, route.maxBodyBytes) : source;
  const sent = rewrite === undefined ? limited : rewrite(limited);
  return route.retryAttempts > 0
    ? new ReplayableBody(sent, { limitBytes: replayLimitBytes })
    : sent;
}

/**
 * The chunks already read from the client, then the rest of its body as it comes. Each chunk is
 * let go once handed on, so no more than what was read is ever held.
 */
export async function* readThenRest(
  read: Buffer[],
  rest: AsyncIterable<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  let chunk = read.shift();
  while (chunk !== undefined) {
    yield chunk;
    chunk = read.shift();
  }
  yield* rest;
}
