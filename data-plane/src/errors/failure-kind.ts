import type { ErrorCode } from "./error-catalog.js";

/**
 * What went wrong talking to an upstream, in the words the log line and metrics use. The first
 * group comes from errors (`classifyUpstreamError`); the rest the proxy decides itself:
 * `status_5xx` (the upstream answered 5xx), `stream_broken` (the connection broke after the
 * response started), and the three degradations that never contacted the upstream:
 * `breaker_open`, `retry_after` (its Retry-After cooldown still runs), `no_healthy_node`.
 */
export type UpstreamFailureKind = ErrorFailureKind | ProxyFailureKind;

export type ProxyFailureKind =
  | "status_5xx"
  | "stream_broken"
  | "breaker_open"
  | "retry_after"
  | "no_healthy_node";

/** Failures an undici or socket error can be classified as. */
export type ErrorFailureKind =
  | "refused"
  | "connect_timeout"
  | "dns"
  | "unreachable"
  | "header_timeout"
  | "body_timeout"
  | "reset"
  | "protocol"
  | "bad_request"
  | "pool_closed"
  | "other";

const KIND_BY_CODE: ReadonlyMap<string, ErrorFailureKind> = new Map(
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
  } satisfies Record<string, ErrorFailureKind>),
);

const CODE_BY_KIND: Readonly<Record<UpstreamFailureKind, ErrorCode>> = Object.freeze({
  refused: "CLAWGATE_UPSTREAM_CONNECT_FAILED",
  connect_timeout: "CLAWGATE_UPSTREAM_CONNECT_FAILED",
  dns: "CLAWGATE_UPSTREAM_CONNECT_FAILED",
  unreachable: "CLAWGATE_UPSTREAM_CONNECT_FAILED",
  pool_closed: "CLAWGATE_UPSTREAM_CONNECT_FAILED",
  header_timeout: "CLAWGATE_UPSTREAM_TIMEOUT",
  body_timeout: "CLAWGATE_UPSTREAM_TIMEOUT",
  reset: "CLAWGATE_UPSTREAM_RESET",
  protocol: "CLAWGATE_UPSTREAM_RESET",
  other: "CLAWGATE_UPSTREAM_RESET",
  bad_request: "CLAWGATE_BAD_REQUEST",
  // Only when a 5xx was dropped for a retry that then could not go out.
  status_5xx: "CLAWGATE_UPSTREAM_FAILED",
  stream_broken: "CLAWGATE_UPSTREAM_RESET",
  breaker_open: "CLAWGATE_BREAKER_OPEN",
  retry_after: "CLAWGATE_UPSTREAM_COOLDOWN",
  no_healthy_node: "CLAWGATE_NO_HEALTHY_NODE",
});

/** Failures where no byte of the request reached the upstream: safe to send again. */
export function neverReachedUpstream(kind: UpstreamFailureKind): boolean {
  return (
    kind === "refused" ||
    kind === "connect_timeout" ||
    kind === "dns" ||
    kind === "unreachable" ||
    kind === "pool_closed"
  );
}

/** Classifies an undici or socket error by its `code` (never by class or message). */
export function classifyUpstreamError(error: unknown): ErrorFailureKind {
  const code = errorCode(error);
  if (code !== undefined) {
    const kind = KIND_BY_CODE.get(code);
    if (kind !== undefined) return kind;
    if (code.startsWith("HPE_")) return "protocol";
  }
  // Happy-eyeballs connects fail with an AggregateError; its parts carry the codes.
  if (error instanceof AggregateError && error.errors.length > 0) {
    return classifyUpstreamError(error.errors[0]);
  }
  return "other";
}

/** The catalog error a client sees for an upstream failure. */
export function errorCodeForFailure(kind: UpstreamFailureKind): ErrorCode {
  return CODE_BY_KIND[kind];
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}
