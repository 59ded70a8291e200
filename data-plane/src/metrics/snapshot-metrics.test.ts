import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { SnapshotMetrics } from "./snapshot-metrics.js";

async function sample(registry: Registry, name: string): Promise<number | undefined> {
  const metric = await registry.getSingleMetric(name)?.get();
  return metric?.values[0]?.value;
}

describe("SnapshotMetrics", () => {
  it("reports the applied version as a value, its time in seconds, nacks and connection", async () => {
    const registry = new Registry();
    const metrics = new SnapshotMetrics(registry);
    expect(await sample(registry, "clawgate_snapshot_version")).toBe(0);

    metrics.applied(42, 1_700_000_000_500);
    metrics.nacked();
    metrics.nacked();
    metrics.connected(true);

    expect(await sample(registry, "clawgate_snapshot_version")).toBe(42);
    expect(await sample(registry, "clawgate_snapshot_applied_timestamp_seconds")).toBe(
      1_700_000_000.5,
    );
    expect(await sample(registry, "clawgate_snapshot_nacks_total")).toBe(2);
    expect(await sample(registry, "clawgate_control_plane_connected")).toBe(1);
    metrics.connected(false);
    expect(await sample(registry, "clawgate_control_plane_connected")).toBe(0);

    const text = await registry.metrics();
    expect(text).toContain("process_cpu_user_seconds_total");
    expect(text).not.toMatch(/clawgate_snapshot_version\{/);
  });
});
