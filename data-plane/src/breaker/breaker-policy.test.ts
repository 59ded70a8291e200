import { BreakerPolicySchema, create } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_BREAKER_SETTINGS,
  resolveBreakerPolicy,
  sameBreakerSettings,
} from "./breaker-policy.js";

describe("resolveBreakerPolicy", () => {
  it("fills an empty proto message (all zeros) with the defaults", () => {
    expect(resolveBreakerPolicy(create(BreakerPolicySchema, { name: "default" }))).toEqual(
      DEFAULT_BREAKER_SETTINGS,
    );
    expect(resolveBreakerPolicy()).toEqual(DEFAULT_BREAKER_SETTINGS);
  });

  it("keeps valid values from a generated message", () => {
    const policy = create(BreakerPolicySchema, {
      windowMs: 10_000,
      minRequests: 5,
      failureRatio: 0.5,
      consecutiveFailures: 3,
      cooldownMs: 1_000,
      cooldownMultiplier: 1.5,
      maxCooldownMs: 9_000,
      halfOpenMaxInFlight: 2,
      halfOpenSuccesses: 4,
      fleetProbe: true,
    });
    expect(resolveBreakerPolicy(policy)).toEqual({
      windowMs: 10_000,
      minRequests: 5,
      failureRatio: 0.5,
      consecutiveFailures: 3,
      cooldownMs: 1_000,
      cooldownMultiplier: 1.5,
      maxCooldownMs: 9_000,
      halfOpenMaxInFlight: 2,
      halfOpenSuccesses: 4,
      fleetProbe: true,
    });
  });

  const rows: [field: string, input: Record<string, number>, expected: Record<string, number>][] = [
    ["ratio above 1", { failureRatio: 1.5 }, { failureRatio: 0.6 }],
    ["ratio 1 is allowed", { failureRatio: 1 }, { failureRatio: 1 }],
    ["multiplier below 1", { cooldownMultiplier: 0.5 }, { cooldownMultiplier: 2 }],
    ["fractional count", { minRequests: 2.5 }, { minRequests: 20 }],
    ["negative cooldown", { cooldownMs: -1 }, { cooldownMs: 30_000 }],
    [
      "max below cooldown is raised",
      { cooldownMs: 60_000, maxCooldownMs: 1_000 },
      { maxCooldownMs: 60_000 },
    ],
  ];
  for (const [name, input, expected] of rows) {
    it(name, () => {
      expect(resolveBreakerPolicy(input)).toMatchObject(expected);
    });
  }

  it("sameBreakerSettings compares every field", () => {
    const a = resolveBreakerPolicy({});
    expect(sameBreakerSettings(a, resolveBreakerPolicy({ cooldownMs: 30_000 }))).toBe(true);
    for (const key of Object.keys(a) as (keyof typeof a)[]) {
      const value = a[key];
      const b = { ...a, [key]: typeof value === "boolean" ? !value : value + 1 };
      expect(sameBreakerSettings(a, b), key).toBe(false);
    }
  });
});
