import type { FailureKind } from "./failure-kind.js";

/** The route-level conditions of `retry.on`. */
export type RetryCondition = "connect-failure" | "reset" | "timeout" | "5xx";

export interface RetryInput {
  /** The request method as received. */
  method: string;
  /** How the attempt that just ended failed. */
  failure: FailureKind;
  /** 1-based number of the attempt that just failed: 1 after the first try. */
  attempt: number;
  /** Retries allowed after the first try (the route's `retry.attempts`). */
  maxAttempts: number;
  /** The route's `retry.on`. */
  retryOn: readonly string[];
  /** Whether the request body can be sent again (`ReplayableBody.replayable`; true when none). */
  bodyReplayable: boolean;
  /** Whether any of the request reached the upstream. */
  reachedUpstream: boolean;
}

export type RetryRefusal =
  | "attempts_exhausted"
  | "response_started"
  | "failure_not_retryable"
  | "condition_not_enabled"
  | "body_not_replayable"
  | "not_idempotent";

export type RetryVerdict =
  | { readonly retry: true }
  | { readonly retry: false; readonly reason: RetryRefusal };

/** RFC 9110 9.2.2: sending these twice has the effect of sending them once. */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"]);

/** The `retry.on` condition a failure falls under; a refusal reason when none can apply. */
const CONDITION: Readonly<Record<FailureKind, RetryCondition | RetryRefusal>> = {
  refused: "connect-failure",
  connect_timeout: "connect-failure",
  dns: "connect-failure",
  unreachable: "connect-failure",
  // One node's bad certificate (expired, wrong name) need not fail the request: the handshake
  // failed before any request byte was sent.
  tls: "connect-failure",
  // A snapshot swap closed the pool; another node of the same snapshot may still be open.
  pool_closed: "connect-failure",
  reset: "reset",
  header_timeout: "timeout",
  status_5xx: "5xx",
  // The response has begun reaching the client; a second one cannot be spliced in.
  body_timeout: "response_started",
  stream_broken: "response_started",
  // Sending the same thing again would fail the same way, or nobody knows what happened.
  protocol: "failure_not_retryable",
  bad_request: "failure_not_retryable",
  other: "failure_not_retryable",
};

const CONDITIONS: ReadonlySet<string> = new Set<RetryCondition>([
  "connect-failure",
  "reset",
  "timeout",
  "5xx",
]);

const RETRY: RetryVerdict = Object.freeze({ retry: true });

/**
 * Whether a failed attempt may be tried again. A request the upstream never saw is safe to resend
 * whatever its method; once it may have been processed only an idempotent method may go again.
 * Either way the route must list the condition in `retry.on` (its default is connect-failure and
 * reset: a reset GET goes again, a reset POST that reached the node does not) and the body must
 * be replayable.
 */
export function retryDecision(input: RetryInput): RetryVerdict {
  if (input.attempt > input.maxAttempts) return refuse("attempts_exhausted");
  const condition = CONDITION[input.failure];
  if (!isCondition(condition)) return refuse(condition);
  if (!input.retryOn.includes(condition)) return refuse("condition_not_enabled");
  if (!input.bodyReplayable) return refuse("body_not_replayable");
  // A 5xx or a header timeout means the request arrived, whatever the caller believes.
  const reached =
    input.reachedUpstream || input.failure === "status_5xx" || input.failure === "header_timeout";
  if (reached && !IDEMPOTENT.has(input.method.toUpperCase())) return refuse("not_idempotent");
  return RETRY;
}

function isCondition(value: RetryCondition | RetryRefusal): value is RetryCondition {
  return CONDITIONS.has(value);
}

function refuse(reason: RetryRefusal): RetryVerdict {
  return { retry: false, reason };
}
