import type { AddressInfo } from "node:net";
import { create, SnapshotSchema } from "@clawgate/proto";
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NodeSeries } from "../health/node-series.js";
import { metricsSource } from "../metrics/metrics-source.js";
import { SnapshotMetrics } from "../metrics/snapshot-metrics.js";
import { AppliedSnapshot } from "../runtime/applied-snapshot.js";
import { createAdminServer } from "./admin-server.js";

let base = "";
let applied: AppliedSnapshot;
let registry: Registry;
let close = async () => {};

beforeEach(async () => {
  registry = new Registry();
  new SnapshotMetrics(registry).applied(0, 0);
  applied = new AppliedSnapshot({ now: () => Date.UTC(2025, 0, 2, 3, 4, 5) });
  const nodes = new NodeSeries();
  nodes.setHealthy("agents", "10.0.0.1:80", true);
  const server = createAdminServer({ registry: metricsSource(registry, nodes), applied });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise((resolve) => server.close(() => resolve()));
});
afterEach(() => close());

function applyGood(version: bigint, source: "control-plane" | "cache" = "control-plane") {
  const result = applied.apply(
    create(SnapshotSchema, {
      version,
      nonce: "n",
      createdAtMs: 1_700_000_000_000n,
      breakers: [{ name: "default" }],
      upstreams: [
        { name: "agents", breaker: "default", nodes: [{ address: "127.0.0.1:8081", weight: 1 }] },
      ],
      routes: [{ name: "api", match: { pathPrefix: "/api" }, upstream: "agents" }],
    }),
    source,
  );
  if (!result.ok) throw new Error(result.reason);
}

describe("admin server", () => {
  it("never shows tenant API key hashes in /config_dump, only how many there are", async () => {
    const hash = "a".repeat(64);
    const result = applied.apply(
      create(SnapshotSchema, {
        version: 3n,
        nonce: "n",
        tenants: [{ name: "acme", apiKeySha256: [hash, "b".repeat(64)], requestsPerMinute: 60 }],
      }),
      "control-plane",
    );
    if (!result.ok) throw new Error(result.reason);

    const text = await (await fetch(`${base}/config_dump`)).text();
    expect(text).not.toContain(hash);
    expect(JSON.parse(text).snapshot.tenants).toEqual([
      { name: "acme", apiKeySha256: ["[redacted]", "[redacted]"], requestsPerMinute: 60 },
    ]);
    // The applied snapshot itself still carries them: the proxy needs them to check keys.
    expect(applied.state()!.compiled.source.tenants[0]!.apiKeySha256).toEqual([
      hash,
      "b".repeat(64),
    ]);
  });

  it("answers /healthz while the process is alive, snapshot or not", async () => {
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  it("is not ready until a snapshot is applied, then ready with its version", async () => {
    const before = await fetch(`${base}/readyz`);
    expect(before.status).toBe(503);
    expect(await before.json()).toEqual({ status: "not ready", reason: "no snapshot applied yet" });

    applyGood(12n);
    const after = await fetch(`${base}/readyz`);
    expect(after.status).toBe(200);
    expect(await after.json()).toEqual({ status: "ready", version: 12, source: "control-plane" });
  });

  it("says where the applied snapshot came from in /readyz and /config_dump", async () => {
    applyGood(7n, "cache");
    const readyz = async () => (await fetch(`${base}/readyz`)).json();
    const dump = async () => (await fetch(`${base}/config_dump`)).json();
    expect(await readyz()).toEqual({ status: "ready", version: 7, source: "cache" });
    expect(await dump()).toMatchObject({ version: 7, source: "cache" });

    // A control plane answers later: its snapshot replaces the cached one, and the source too.
    applyGood(8n);
    expect(await readyz()).toEqual({ status: "ready", version: 8, source: "control-plane" });
    expect(await dump()).toMatchObject({ version: 8, source: "control-plane" });
  });

  it("dumps the applied snapshot with its version and applied time", async () => {
    const before = await fetch(`${base}/config_dump`);
    expect(before.status).toBe(503);
    expect(await before.json()).toMatchObject({ error: { code: "CLAWGATE_NOT_READY" } });

    applyGood(12n);
    const res = await fetch(`${base}/config_dump`);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({
      version: 12,
      appliedAt: "2025-01-02T03:04:05.000Z",
      source: "control-plane",
      snapshot: {
        version: "12",
        routes: [{ name: "api", match: { pathPrefix: "/api" }, upstream: "agents" }],
        upstreams: [{ name: "agents", nodes: [{ address: "127.0.0.1:8081", weight: 1 }] }],
      },
    });
  });

  it("serves the registry's metrics in the Prometheus text format", async () => {
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    expect(text).toMatch(/^clawgate_snapshot_version 0$/m);
    expect(text).toContain("process_resident_memory_bytes");
    expect(text).toContain(
      'clawgate_upstream_node_healthy{upstream="agents",node="10.0.0.1:80"} 1',
    );
  });

  it("serves only the families named by ?name=, from the registry and the per-node series", async () => {
    const res = await fetch(
      `${base}/metrics?name=clawgate_snapshot_version&name=clawgate_upstream_node_healthy`,
    );
    expect(res.status).toBe(200);
    const families = [...(await res.text()).matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]);
    expect(families).toEqual(["clawgate_snapshot_version", "clawgate_upstream_node_healthy"]);
    // A name nothing carries is an empty answer, as a family with no series would be.
    const none = await fetch(`${base}/metrics?name=clawgate_no_such_metric`);
    expect(none.status).toBe(200);
    expect(await none.text()).toBe("");
  });

  it("refreshes the event-loop lag gauges when only one of them is asked for", async () => {
    const text = await (
      await fetch(`${base}/metrics?name=nodejs_eventloop_lag_max_seconds`)
    ).text();
    expect(text).toMatch(/^# TYPE nodejs_eventloop_lag_max_seconds gauge$/m);
    // prom-client sets the gauge only when the lag collector runs; unset, it would have no sample.
    expect(text).toMatch(/^nodejs_eventloop_lag_max_seconds \d/m);
  });

  it("answers 400 naming a ?name= that is not a metric name", async () => {
    const res = await fetch(`${base}/metrics?name=${encodeURIComponent("up{job}")}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("CLAWGATE_ADMIN_BAD_REQUEST");
    expect(body.error.message).toContain('name "up{job}"');
  });

  it("answers 404 for unknown paths and 405 for other methods", async () => {
    expect((await fetch(`${base}/nope`)).status).toBe(404);
    const post = await fetch(`${base}/healthz`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    // A query string does not change the endpoint.
    expect((await fetch(`${base}/healthz?verbose=1`)).status).toBe(200);
  });
});
