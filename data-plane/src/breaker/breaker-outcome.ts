import type { BreakerFailure } from "../errors/failure-kind.js";

export { type BreakerFailure, breakerOutcomeOf } from "../errors/failure-kind.js";

/** What a breaker learns from one request: success, or one of the failures it counts. */
export type BreakerOutcome = "success" | BreakerFailure;
