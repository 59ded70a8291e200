import type { IncomingMessage } from "node:http";
import { ReplayableBody } from "../../retry/replayable-body.js";
import type { Exchange } from "./exchange.js";

/**
 * The request body's bytes as the client sent them, from what the pipeline already knows (never
 * a second read of the body): the access log's bytesIn, and the token budget's prompt estimate
 * for a stream that reported no usage. Undefined when not known (a chunked body passed through).
 */
export function bodyBytesIn(exchange: Exchange): number | undefined {
  const body = exchange.body;
  if (body === null) return 0;
  // A body the gateway rewrote (include_usage, read whole or added at the end of a stream) is
  // logged as the client sent it: a replayable one's bytesRead counts the added bytes too.
  if (exchange.clientBodyBytes >= 0) return exchange.clientBodyBytes;
  if (Buffer.isBuffer(body)) return body.length;
  if (body instanceof ReplayableBody) return body.bytesRead;
  return declaredLength(exchange.req);
}

/** Content-Length when the client declared one; undefined for a chunked body. */
export function declaredLength(req: IncomingMessage): number | undefined {
  const declared = req.headers?.["content-length"];
  if (declared === undefined)
    return req.headers?.["transfer-encoding"] === undefined ? 0 : undefined;
  const bytes = Number(declared);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}
