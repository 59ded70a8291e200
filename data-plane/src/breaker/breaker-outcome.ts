import type { FailureKind } from "../retry/failure-kind.js";

/** What a breaker learns from one request; see `breakerOutcomeOf` for how failures map. */
export type BreakerOutcome = "success" | "transport" | "status_5xx" | "stream_broken";

/** The outcomes a trip rule is told about. */
export type BreakerFailure = Exclude<BreakerOutcome, "success">;

/**
 * The outcome to `record` for a failed attempt, or undefined when the failure says nothing about
 * the upstream (then `release` the permit). Transport failures are the ones before response
 * headers (seed 004: count "headers never arrived" apart from "stream broke at 40 %").
 */
export function breakerOutcomeOf(kind: FailureKind): BreakerFailure | undefined {
  switch (kind) {
    case "refused":
    case "connect_timeout":
    case "dns":
    case "unreachable":
    case "tls":
    case "reset":
    case "header_timeout":
    case "protocol":
    case "other":
      return "transport";
    case "status_5xx":
      return "status_5xx";
    case "body_timeout":
    case "stream_broken":
      return "stream_broken";
    case "pool_closed":
    case "bad_request":
      return undefined;
  }
}
