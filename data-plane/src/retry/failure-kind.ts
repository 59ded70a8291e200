import type { UpstreamFailureKind } from "../errors/upstream-failure.js";

/**
 * How one attempt at an upstream failed, as the proxy observed it: the proxy's own vocabulary
 * (errors/upstream-failure.ts `UpstreamFailureKind`) less the three degradations that never
 * make an attempt (breaker_open, retry_after, no_healthy_node), so there is one list to keep.
 *
 * - `refused`, `connect_timeout`, `dns`, `unreachable`: no connection; the upstream never saw it.
 * - `tls`: the TLS handshake failed (a certificate refused either way); nothing was sent.
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
export type FailureKind = Exclude<
  UpstreamFailureKind,
  "breaker_open" | "retry_after" | "no_healthy_node"
>;

/** Every kind once; the Record makes the compiler catch a kind added to the vocabulary. */
const EVERY_KIND: Record<FailureKind, true> = {
  refused: true,
  connect_timeout: true,
  dns: true,
  unreachable: true,
  tls: true,
  pool_closed: true,
  reset: true,
  header_timeout: true,
  protocol: true,
  status_5xx: true,
  body_timeout: true,
  stream_broken: true,
  bad_request: true,
  other: true,
};

export const FAILURE_KINDS = Object.keys(EVERY_KIND) as readonly FailureKind[];
