/**
 * How one attempt at an upstream failed, as the proxy observed it. It is a superset of the
 * proxy's error classification (errors/upstream-failure.ts `UpstreamFailureKind`) plus the two
 * outcomes only the proxy sees, so a classified error can be passed straight in.
 *
 * - `refused`, `connect_timeout`, `dns`, `unreachable`: no connection; the upstream never saw it.
 * - `pool_closed`: our connection pool was closed under the request (a snapshot swap): ours, not
 *   the upstream's, and it never reached it.
 * - `reset`: the connection dropped before response headers arrived.
 * - `header_timeout`: no response headers in time (also the total timeout firing before them).
 * - `protocol`: the upstream answered something that is not HTTP.
 * - `status_5xx`: the upstream answered with a 5xx status.
 * - `body_timeout`, `stream_broken`: headers arrived, then the body stalled or the connection
 *   broke after some bytes; the response has started, so it can be neither retried nor blamed on
 *   an unreachable upstream.
 * - `bad_request`: the request itself could not be sent; the upstream is not at fault.
 * - `other`: anything unclassified.
 */
export type FailureKind =
  | "refused"
  | "connect_timeout"
  | "dns"
  | "unreachable"
  | "pool_closed"
  | "reset"
  | "header_timeout"
  | "protocol"
  | "status_5xx"
  | "body_timeout"
  | "stream_broken"
  | "bad_request"
  | "other";

export const FAILURE_KINDS: readonly FailureKind[] = [
  "refused",
  "connect_timeout",
  "dns",
  "unreachable",
  "pool_closed",
  "reset",
  "header_timeout",
  "protocol",
  "status_5xx",
  "body_timeout",
  "stream_broken",
  "bad_request",
  "other",
];
