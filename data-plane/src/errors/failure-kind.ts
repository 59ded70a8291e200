import type { ErrorCode } from "./error-catalog.js";
import { isTlsFailureCode } from "./tls-failure-code.js";

/**
 * The one vocabulary of what went wrong with a proxied request, used by the classifier, the
 * retry decision, the breaker, the metrics (`clawgate_upstream_errors_total{kind}`), the log
 * lines and the error a client gets. Each kind's consequences are one row of `TRAITS` below.
 *
 * Attempt failures (an attempt at a node failed):
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
 *
 * Fail-fast kinds (no attempt was made): `breaker_open`, `retry_after` (the upstream's
 * Retry-After cooldown still runs), `no_healthy_node`.
 *
 * Ended kinds (the proxy ended the request itself, so the upstream is not blamed for it):
 * `client_gone` (the client closed its connection first), `aborted` (the answer was already
 * given: total timeout, stale copy served), `internal` (a bug in the proxy: 500) and `rejected`
 * (a route policy refused the request: the Failure carries the catalog code).
 */
export type FailureKind = AttemptFailureKind | FailFastKind | EndedKind;

export type AttemptFailureKind =
  | "refused"
  | "connect_timeout"
  | "dns"
  | "unreachable"
  | "tls"
  | "pool_closed"
  | "reset"
  | "header_timeout"
  | "protocol"
  | "status_5xx"
  | "body_timeout"
  | "stream_broken"
  | "bad_request"
  | "other";

export type FailFastKind = "breaker_open" | "retry_after" | "no_healthy_node";
export type EndedKind = "client_gone" | "aborted" | "internal" | "rejected";

/** The route-level conditions of `retry.on`. */
export type RetryCondition = "connect-failure" | "reset" | "timeout" | "5xx";

/** Why a failure can never be retried, whatever `retry.on` says. */
export type NeverRetried = "response_started" | "failure_not_retryable";

/** What a breaker learns from one request's failure. */
export type BreakerFailure = "transport" | "status_5xx" | "stream_broken";

interface Traits {
  /** The catalog error a client gets when this failure ends its request. */
  readonly code: ErrorCode;
  /** The `retry.on` condition it falls under, or why it is never retried. */
  readonly retry: RetryCondition | NeverRetried;
  /** Whether any of the request may have reached the upstream. */
  readonly reachedUpstream: boolean;
  /** What the upstream's breaker records; undefined: the permit is handed back unrecorded. */
  readonly breaker: BreakerFailure | undefined;
  /** Counted in clawgate_upstream_errors_total and logged. */
  readonly counted: boolean;
}

function traits(
  code: ErrorCode,
  retry: RetryCondition | NeverRetried,
  reachedUpstream: boolean,
  breaker: BreakerFailure | undefined,
  counted = true,
): Traits {
  return Object.freeze({ code, retry, reachedUpstream, breaker, counted });
}

const CONNECT = "CLAWGATE_UPSTREAM_CONNECT_FAILED";
const RESET = "CLAWGATE_UPSTREAM_RESET";
const TIMEOUT = "CLAWGATE_UPSTREAM_TIMEOUT";

/** Every kind once: the Record makes the compiler catch a kind without its consequences. */
const TRAITS: Readonly<Record<FailureKind, Traits>> = Object.freeze({
  refused: traits(CONNECT, "connect-failure", false, "transport"),
  connect_timeout: traits(CONNECT, "connect-failure", false, "transport"),
  dns: traits(CONNECT, "connect-failure", false, "transport"),
  unreachable: traits(CONNECT, "connect-failure", false, "transport"),
  // One node's bad certificate (expired, wrong name) need not fail the request: the handshake
  // failed before any request byte was sent. The client learns only that the gateway could not
  // connect; the log and clawgate_upstream_errors_total{kind="tls"} name the certificate.
  tls: traits(CONNECT, "connect-failure", false, "transport"),
  // A snapshot swap closed the pool; another node of the same snapshot may still be open.
  pool_closed: traits(CONNECT, "connect-failure", false, undefined),
  reset: traits(RESET, "reset", true, "transport"),
  // A header timeout means the request arrived, whatever the caller believes.
  header_timeout: traits(TIMEOUT, "timeout", true, "transport"),
  // Sending the same thing again would fail the same way, or nobody knows what happened.
  protocol: traits(RESET, "failure_not_retryable", true, "transport"),
  other: traits(RESET, "failure_not_retryable", true, "transport"),
  bad_request: traits("CLAWGATE_BAD_REQUEST", "failure_not_retryable", false, undefined, false),
  // Only when a 5xx was dropped for a retry that then could not go out.
  status_5xx: traits("CLAWGATE_UPSTREAM_FAILED", "5xx", true, "status_5xx"),
  // The response has begun reaching the client; a second one cannot be spliced in. Seed 004:
  // "stream broke after N bytes" is counted apart from "headers never arrived".
  body_timeout: traits(TIMEOUT, "response_started", true, "stream_broken"),
  stream_broken: traits(RESET, "response_started", true, "stream_broken"),
  breaker_open: traits("CLAWGATE_BREAKER_OPEN", "failure_not_retryable", false, undefined),
  retry_after: traits("CLAWGATE_UPSTREAM_COOLDOWN", "failure_not_retryable", false, undefined),
  no_healthy_node: traits("CLAWGATE_NO_HEALTHY_NODE", "failure_not_retryable", false, undefined),
  client_gone: traits("CLAWGATE_BAD_REQUEST", "failure_not_retryable", false, undefined, false),
  aborted: traits("CLAWGATE_INTERNAL", "failure_not_retryable", false, undefined, false),
  internal: traits("CLAWGATE_INTERNAL", "failure_not_retryable", false, undefined, false),
  // The policy's own code travels on the Failure; 403 only if one ever came without.
  rejected: traits("CLAWGATE_FORBIDDEN", "failure_not_retryable", false, undefined, false),
} satisfies Record<FailureKind, Traits>);

/** Every attempt failure kind once, for tables that must cover them all. */
export const FAILURE_KINDS: readonly AttemptFailureKind[] = Object.freeze([
  "refused",
  "connect_timeout",
  "dns",
  "unreachable",
  "tls",
  "pool_closed",
  "reset",
  "header_timeout",
  "protocol",
  "status_5xx",
  "body_timeout",
  "stream_broken",
  "bad_request",
  "other",
]);

const ATTEMPT_KINDS: ReadonlySet<FailureKind> = new Set(FAILURE_KINDS);

/** Whether an attempt at a node failed (not a fail-fast, not ended by the proxy). */
export function isAttemptFailure(kind: FailureKind): kind is AttemptFailureKind {
  return ATTEMPT_KINDS.has(kind);
}

const KIND_BY_CODE: ReadonlyMap<string, AttemptFailureKind> = new Map(
  Object.entries({
    ECONNREFUSED: "refused",
    UND_ERR_CONNECT_TIMEOUT: "connect_timeout",
    ETIMEDOUT: "connect_timeout",
    ENOTFOUND: "dns",
    EAI_AGAIN: "dns",
    EHOSTUNREACH: "unreachable",
    ENETUNREACH: "unreachable",
    EADDRNOTAVAIL: "unreachable",
    UND_ERR_HEADERS_TIMEOUT: "header_timeout",
    UND_ERR_BODY_TIMEOUT: "body_timeout",
    UND_ERR_SOCKET: "reset",
    ECONNRESET: "reset",
    EPIPE: "reset",
    UND_ERR_RES_CONTENT_LENGTH_MISMATCH: "reset",
    UND_ERR_HEADERS_OVERFLOW: "protocol",
    UND_ERR_RES_EXCEEDED_MAX_SIZE: "protocol",
    HPE_INVALID_CONSTANT: "protocol",
    UND_ERR_INVALID_ARG: "bad_request",
    UND_ERR_NOT_SUPPORTED: "bad_request",
    UND_ERR_REQ_CONTENT_LENGTH_MISMATCH: "bad_request",
    UND_ERR_CLOSED: "pool_closed",
    UND_ERR_DESTROYED: "pool_closed",
  } satisfies Record<string, AttemptFailureKind>),
);

/** Classifies an undici or socket error by its `code` (never by class or message). */
export function classifyUpstreamError(error: unknown): AttemptFailureKind {
  const code = errorCode(error);
  if (code !== undefined) {
    const kind = KIND_BY_CODE.get(code);
    if (kind !== undefined) return kind;
    if (code.startsWith("HPE_")) return "protocol";
    if (isTlsFailureCode(code)) return "tls";
  }
  // Happy-eyeballs connects fail with an AggregateError; its parts carry the codes.
  if (error instanceof AggregateError && error.errors.length > 0) {
    return classifyUpstreamError(error.errors[0]);
  }
  return "other";
}

/** The catalog error a client sees for a failure. */
export function errorCodeForFailure(kind: FailureKind): ErrorCode {
  return TRAITS[kind].code;
}

/** Failures where no byte of the request reached the upstream: safe to send again. */
export function neverReachedUpstream(kind: FailureKind): boolean {
  return !TRAITS[kind].reachedUpstream;
}

/** The `retry.on` condition a failure falls under, or why it is never retried. */
export function retryConditionOf(kind: FailureKind): RetryCondition | NeverRetried {
  return TRAITS[kind].retry;
}

/**
 * The outcome to `record` for a failure, or undefined when the failure says nothing about the
 * upstream (then `release` the permit). Transport failures are the ones before response headers.
 */
export function breakerOutcomeOf(kind: FailureKind): BreakerFailure | undefined {
  return TRAITS[kind].breaker;
}

/** Whether the proxy ended the request itself (client gone, answered already, internal bug). */
export function endedByProxy(kind: FailureKind): kind is EndedKind {
  return kind === "client_gone" || kind === "aborted" || kind === "internal";
}

/** Whether the failure is counted in clawgate_upstream_errors_total. */
export function countedFailure(kind: FailureKind): boolean {
  return TRAITS[kind].counted;
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}
