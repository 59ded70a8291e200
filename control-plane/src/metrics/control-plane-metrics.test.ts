import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import type { DataPlaneState } from "../fleet/data-plane-view.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { registerControlPlaneMetrics } from "./control-plane-metrics.js";

describe("control plane metrics", () => {
  it("exposes the published version as a value, the fleet by state and NACKs", async () => {
    let status: SnapshotStatus = {
      version: 12,
      published: true,
      publishedVersion: 12,
      counts: { routes: 1, upstreams: 1, breakers: 0, tenants: 0 },
    };
    let counts: Record<DataPlaneState, number> = {
      SYNCED: 2,
      SYNCING: 1,
      STALE: 0,
      NACKED: 1,
      DISCONNECTED: 0,
    };
    const registry = new Registry();
    const metrics = registerControlPlaneMetrics(registry, {
      builder: { status: () => status },
      fleet: { counts: () => counts },
    });
    metrics.recordNack();

    let text = await registry.metrics();
    expect(text).toContain("clawgate_snapshot_version 12\n");
    expect(text).toContain("clawgate_snapshot_published 1\n");
    expect(text).toContain('clawgate_dataplanes{state="SYNCED"} 2\n');
    expect(text).toContain('clawgate_dataplanes{state="NACKED"} 1\n');
    expect(text).toContain('clawgate_dataplanes{state="STALE"} 0\n');
    expect(text).toContain("clawgate_snapshot_nacks_total 1\n");

    // A refused read keeps the served version and flips published.
    status = { ...status, version: 13, published: false, reason: "broken reference" };
    counts = { ...counts, SYNCED: 3, SYNCING: 0 };
    metrics.recordNack();
    text = await registry.metrics();
    expect(text).toContain("clawgate_snapshot_version 12\n");
    expect(text).toContain("clawgate_snapshot_published 0\n");
    expect(text).toContain('clawgate_dataplanes{state="SYNCED"} 3\n');
    expect(text).toContain("clawgate_snapshot_nacks_total 2\n");
  });

  it("adds up the snapshot bytes written to data-plane streams", async () => {
    const registry = new Registry();
    const metrics = registerControlPlaneMetrics(registry, {
      builder: {
        status: () => ({
          version: 0,
          published: false,
          publishedVersion: null,
          counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
        }),
      },
      fleet: { counts: () => ({ SYNCED: 0, SYNCING: 0, STALE: 0, NACKED: 0, DISCONNECTED: 0 }) },
    });
    expect(await registry.metrics()).toContain("clawgate_snapshot_bytes_sent_total 0\n");
    metrics.recordSent(1200);
    metrics.recordSent(34);
    expect(await registry.metrics()).toContain("clawgate_snapshot_bytes_sent_total 1234\n");
  });

  it("counts snapshot sends by kind, both kinds from the start", async () => {
    const registry = new Registry();
    const metrics = registerControlPlaneMetrics(registry, {
      builder: {
        status: () => ({
          version: 0,
          published: false,
          publishedVersion: null,
          counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
        }),
      },
      fleet: { counts: () => ({ SYNCED: 0, SYNCING: 0, STALE: 0, NACKED: 0, DISCONNECTED: 0 }) },
    });
    expect(await registry.metrics()).toContain('clawgate_snapshot_sends_total{kind="delta"} 0\n');
    metrics.recordSend("full");
    metrics.recordSend("delta");
    metrics.recordSend("delta");
    const text = await registry.metrics();
    expect(text).toContain('clawgate_snapshot_sends_total{kind="full"} 1\n');
    expect(text).toContain('clawgate_snapshot_sends_total{kind="delta"} 2\n');
  });
});
