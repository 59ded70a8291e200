import { create, UpstreamSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import type { CompiledUpstream } from "../compiler/compiled-types.js";
import {
  DEFAULT_HEALTH_CHECK,
  type HealthSource,
  healthCheckSettings,
  healthTargets,
} from "./health-targets.js";

// Compile-time: a compiled snapshot's upstreams are valid health sources.
export type CompiledUpstreamIsHealthSource = CompiledUpstream extends HealthSource ? true : never;
const compiledUpstreamFits: CompiledUpstreamIsHealthSource = true;

describe("healthCheckSettings", () => {
  it("accepts a compiled upstream (checked by tsc)", () => {
    expect(compiledUpstreamFits).toBe(true);
  });

  it("fills defaults and treats zeros as unset", () => {
    expect(healthCheckSettings()).toEqual(DEFAULT_HEALTH_CHECK);
    expect(
      healthCheckSettings({ intervalMs: 0, timeoutMs: 500, unhealthyThreshold: 0, path: "/h" }),
    ).toEqual({ ...DEFAULT_HEALTH_CHECK, timeoutMs: 500, path: "/h" });
  });
});

describe("healthTargets", () => {
  it("lists every node of every compiled upstream with its upstream's health check", () => {
    const upstream = create(UpstreamSchema, {
      name: "agents",
      nodes: [
        { address: "127.0.0.1:8081", weight: 1 },
        { address: "[::1]:9000", weight: 2 },
      ],
      healthCheck: { intervalMs: 2_000, path: "/healthz", expectStatus: "ok" },
    });
    // Shaped like a CompiledUpstream (a compiled snapshot's `upstreams.values()`).
    const compiled = {
      name: "agents",
      nodes: [
        { address: "127.0.0.1:8081", host: "127.0.0.1", port: 8081 },
        { address: "[::1]:9000", host: "::1", port: 9000 },
      ],
      source: upstream,
    };
    const targets = healthTargets([compiled]);
    expect(
      targets.map(({ upstream, address, host, port }) => [upstream, address, host, port]),
    ).toEqual([
      ["agents", "127.0.0.1:8081", "127.0.0.1", 8081],
      ["agents", "[::1]:9000", "::1", 9000],
    ]);
    expect(healthCheckSettings(targets[1]?.healthCheck)).toEqual({
      ...DEFAULT_HEALTH_CHECK,
      intervalMs: 2_000,
      path: "/healthz",
      expectStatus: "ok",
    });
  });
});
