import { DEFAULT_RETRY_ON } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { FAILURE_KINDS, type AttemptFailureKind as FailureKind } from "../errors/failure-kind.js";
import { type RetryInput, retryDecision } from "./retry-decision.js";

const ALL = ["connect-failure", "reset", "timeout", "5xx"];
/** What a route gets when it says nothing about retries. */
const DEFAULT = [...DEFAULT_RETRY_ON];
const base: RetryInput = {
  method: "GET",
  failure: "refused",
  attempt: 1,
  maxAttempts: 2,
  retryOn: ALL,
  bodyReplayable: true,
  reachedUpstream: false,
};

describe("retryDecision", () => {
  // method, failure, reached upstream, body replayable, retryOn -> verdict
  const rows: [string, FailureKind, boolean, boolean, string[], string][] = [
    // Never reached: any method, as long as the body can be sent again.
    ["POST", "refused", false, true, ALL, "retry"],
    ["POST", "connect_timeout", false, true, ALL, "retry"],
    ["PATCH", "refused", false, true, ["connect-failure"], "retry"],
    ["POST", "dns", false, true, ["connect-failure"], "retry"],
    ["POST", "unreachable", false, true, ["connect-failure"], "retry"],
    ["POST", "pool_closed", false, true, ["connect-failure"], "retry"],
    ["POST", "refused", false, false, ALL, "body_not_replayable"],
    ["GET", "refused", false, true, ["reset", "5xx"], "condition_not_enabled"],
    ["POST", "refused", false, true, [], "condition_not_enabled"],
    // A reset may come before the request was written (reused keep-alive socket).
    ["POST", "reset", false, true, ["reset"], "retry"],
    ["POST", "reset", true, true, ["reset"], "not_idempotent"],
    ["PUT", "reset", true, true, ["reset"], "retry"],
    ["PUT", "reset", true, false, ["reset"], "body_not_replayable"],
    ["GET", "reset", true, true, ["connect-failure"], "condition_not_enabled"],
    // The default policy: a GET whose node was killed mid-request goes to another node; a POST
    // that may have been acted on does not, and a 5xx or a timeout is passed on as it is.
    ["GET", "reset", true, true, DEFAULT, "retry"],
    ["HEAD", "reset", true, true, DEFAULT, "retry"],
    ["PUT", "reset", true, true, DEFAULT, "retry"],
    ["DELETE", "reset", true, true, DEFAULT, "retry"],
    ["POST", "reset", true, true, DEFAULT, "not_idempotent"],
    ["PATCH", "reset", true, true, DEFAULT, "not_idempotent"],
    ["POST", "reset", false, true, DEFAULT, "retry"],
    ["POST", "refused", false, true, DEFAULT, "retry"],
    ["GET", "reset", true, false, DEFAULT, "body_not_replayable"],
    ["GET", "status_5xx", true, true, DEFAULT, "condition_not_enabled"],
    ["GET", "header_timeout", true, true, DEFAULT, "condition_not_enabled"],
    ["GET", "stream_broken", true, true, DEFAULT, "response_started"],
    // Reached: only idempotent methods, only when listed.
    ["GET", "status_5xx", true, true, ["5xx"], "retry"],
    ["HEAD", "status_5xx", true, true, ["5xx"], "retry"],
    ["OPTIONS", "status_5xx", true, true, ["5xx"], "retry"],
    ["DELETE", "status_5xx", true, true, ["5xx"], "retry"],
    ["TRACE", "status_5xx", true, true, ["5xx"], "retry"],
    ["get", "status_5xx", true, true, ["5xx"], "retry"],
    ["POST", "status_5xx", true, true, ["5xx"], "not_idempotent"],
    ["PATCH", "status_5xx", true, true, ["5xx"], "not_idempotent"],
    ["CONNECT", "status_5xx", true, true, ["5xx"], "not_idempotent"],
    [
      "GET",
      "status_5xx",
      true,
      true,
      ["connect-failure", "reset", "timeout"],
      "condition_not_enabled",
    ],
    ["GET", "header_timeout", true, true, ["timeout"], "retry"],
    ["POST", "header_timeout", true, true, ["timeout"], "not_idempotent"],
    ["GET", "header_timeout", true, true, ["5xx"], "condition_not_enabled"],
    // A 5xx or header timeout reached the upstream even if the caller says otherwise.
    ["POST", "status_5xx", false, true, ["5xx"], "not_idempotent"],
    ["POST", "header_timeout", false, true, ["timeout"], "not_idempotent"],
    // The response has started: never.
    ["GET", "stream_broken", true, true, ALL, "response_started"],
    ["GET", "body_timeout", true, true, ALL, "response_started"],
    // Sending it again would fail the same way, or nobody knows what happened.
    ["GET", "protocol", true, true, ALL, "failure_not_retryable"],
    ["GET", "bad_request", false, true, ALL, "failure_not_retryable"],
    ["GET", "other", false, true, ALL, "failure_not_retryable"],
  ];
  for (const [method, failure, reachedUpstream, bodyReplayable, retryOn, verdict] of rows) {
    it(`${method} ${failure} reached=${reachedUpstream} replayable=${bodyReplayable} on=[${retryOn}] -> ${verdict}`, () => {
      const result = retryDecision({
        ...base,
        method,
        failure,
        reachedUpstream,
        bodyReplayable,
        retryOn,
      });
      expect(result).toEqual(
        verdict === "retry" ? { retry: true } : { retry: false, reason: verdict },
      );
    });
  }

  it("allows no more than maxAttempts retries", () => {
    const rows: [attempt: number, maxAttempts: number, retry: boolean][] = [
      [1, 0, false],
      [1, 1, true],
      [2, 1, false],
      [1, 2, true],
      [2, 2, true],
      [3, 2, false],
      [9, 2, false],
    ];
    for (const [attempt, maxAttempts, retry] of rows) {
      const result = retryDecision({ ...base, attempt, maxAttempts });
      expect(result, `attempt ${attempt} of ${maxAttempts}`).toEqual(
        retry ? { retry: true } : { retry: false, reason: "attempts_exhausted" },
      );
    }
  });

  it("over every combination: never retries a non-idempotent request that reached the upstream", () => {
    const methods = [
      "GET",
      "HEAD",
      "OPTIONS",
      "PUT",
      "DELETE",
      "TRACE",
      "POST",
      "PATCH",
      "CONNECT",
    ];
    const retryOns = [[], ["connect-failure"], ["reset"], ["timeout"], ["5xx"], DEFAULT, ALL];
    let retried = 0;
    for (const method of methods)
      for (const failure of FAILURE_KINDS)
        for (const reachedUpstream of [false, true])
          for (const bodyReplayable of [false, true])
            for (const retryOn of retryOns) {
              const input = { ...base, method, failure, reachedUpstream, bodyReplayable, retryOn };
              const { retry } = retryDecision(input);
              if (!retry) continue;
              retried += 1;
              expect(bodyReplayable).toBe(true);
              expect([
                "stream_broken",
                "body_timeout",
                "protocol",
                "bad_request",
                "other",
              ]).not.toContain(failure);
              const neverReached =
                !reachedUpstream && failure !== "status_5xx" && failure !== "header_timeout";
              if (!neverReached) expect(["POST", "PATCH", "CONNECT"]).not.toContain(method);
            }
    expect(retried).toBeGreaterThan(0);
  });
});
