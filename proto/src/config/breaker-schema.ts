import { z } from "zod";
import { DEFAULT_BREAKER_POLICY } from "./defaults.js";
import { ms } from "./field-rules.js";

const d = DEFAULT_BREAKER_POLICY;

export const breakerSchema = z
  .strictObject({
    /** Sliding window failures are counted over; default 30 s (seed 004). */
    windowMs: ms(1_000, 3_600_000, d.windowMs),
    /** Requests the window must hold before the failure ratio counts; default 20. */
    minRequests: z.int().min(1).max(100_000).default(d.minRequests),
    /** Failure share in the window that opens the breaker; default 0.6. */
    failureRatio: z.number().gt(0).max(1).default(d.failureRatio),
    /** Consecutive transport failures that open it at any volume; default 5. */
    consecutiveFailures: z.int().min(1).max(1_000).default(d.consecutiveFailures),
    /** First open period; default 30 s. */
    cooldownMs: ms(100, 3_600_000, d.cooldownMs),
    /** Each failed half-open probe multiplies the cooldown by this; default 2. */
    cooldownMultiplier: z.number().min(1).max(10).default(d.cooldownMultiplier),
    /** Cap on the grown cooldown; default 300 s. */
    maxCooldownMs: ms(100, 3_600_000, d.maxCooldownMs),
    /** Probe requests allowed at once while half-open; default 1. */
    halfOpenMaxInFlight: z.int().min(1).max(100).default(d.halfOpenMaxInFlight),
    /** Consecutive probe successes that close it; default 2. */
    halfOpenSuccesses: z.int().min(1).max(100).default(d.halfOpenSuccesses),
    /** One data plane probes half-open for the whole fleet, the rest wait; default false (seed 004). */
    fleetProbe: z.boolean().default(d.fleetProbe),
  })
  .superRefine((breaker, ctx) => {
    if (breaker.maxCooldownMs < breaker.cooldownMs) {
      ctx.addIssue({
        code: "custom",
        path: ["maxCooldownMs"],
        message: `must be at least cooldownMs (${breaker.cooldownMs})`,
      });
    }
  });

/** A breaker document with every default filled in, as stored and published. */
export type BreakerDocument = z.infer<typeof breakerSchema>;
