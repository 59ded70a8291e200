import { type FailureKind, type RetryCondition, retryConditionOf } from "../errors/failure-kind.js";

export type { RetryCondition } from "../errors/failure-kind.js";

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
  const condition = retryConditionOf(input.failure);
  if (condition === "response_started" || condition === "failure_not_retryable") {
    return refuse(condition);
  }
  if (!input.retryOn.includes(condition satisfies RetryCondition)) {
    return refuse("condition_not_enabled");
  }
  if (!input.bodyReplayable) return refuse("body_not_replayable");
  // A 5xx or a header timeout means the request arrived, whatever the caller believes.
  const reached =
    input.reachedUpstream || input.failure === "status_5xx" || input.failure === "header_timeout";
  if (reached && !IDEMPOTENT.has(input.method.toUpperCase())) return refuse("not_idempotent");
  return RETRY;
}

function refuse(reason: RetryRefusal): RetryVerdict {
  return { retry: false, reason };
}
