import type { IncomingHttpHeaders } from "node:http";

// Case-insensitive without lowercasing a copy: three stages ask this of every response.
const EVENT_STREAM = /^text\/event-stream/i;

/**
 * Whether a response is a stream: server-sent events, or a chunked body of no declared length
 * (token streams from model backends). Such a response may rightly last longer than the
 * route's totalMs, so from its headers on it is bounded by its silence (streamIdleMs) instead,
 * and the breaker judges it by its headers.
 */
export function isStreamingResponse(status: number, headers: IncomingHttpHeaders): boolean {
  if (status < 200 || status === 204 || status === 304) return false;
  const type = headers["content-type"];
  if (typeof type === "string" && EVENT_STREAM.test(type)) return true;
  return headers["content-length"] === undefined && headers["transfer-encoding"] !== undefined;
}
