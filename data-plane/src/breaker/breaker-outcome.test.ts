import { describe, expect, it } from "vitest";
import { FAILURE_KINDS, type AttemptFailureKind as FailureKind } from "../errors/failure-kind.js";
import { breakerOutcomeOf } from "./breaker-outcome.js";

describe("breakerOutcomeOf", () => {
  const expected: Record<FailureKind, string | undefined> = {
    refused: "transport",
    connect_timeout: "transport",
    dns: "transport",
    unreachable: "transport",
    tls: "transport",
    pool_closed: undefined,
    reset: "transport",
    header_timeout: "transport",
    protocol: "transport",
    status_5xx: "status_5xx",
    body_timeout: "stream_broken",
    stream_broken: "stream_broken",
    bad_request: undefined,
    other: "transport",
  };
  for (const kind of FAILURE_KINDS) {
    it(`${kind} -> ${expected[kind]}`, () => {
      expect(breakerOutcomeOf(kind)).toBe(expected[kind]);
    });
  }
});
