import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigService } from "../resources/config-service.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { buildAdminApp } from "./app.js";
import { APPLY_BODY_LIMIT_BYTES, APPLY_MAX_RESOURCES } from "./apply-limits.js";

// etcd with its default limits (128 operations, 1.5 MiB per request), as deployed.
let etcd: EtcdProcess;
let store: Store;
let app: FastifyInstance;

const status: SnapshotStatus = {
  version: 1,
  published: true,
  publishedVersion: 1,
  counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
};

beforeAll(async () => {
  etcd = await startEtcd();
  store = await openEtcdStore({ endpoints: [etcd.endpoint] });
  app = await buildAdminApp({
    config: new ConfigService(store, "/limits/"),
    snapshot: { status: () => status },
    fleet: { list: () => [] },
  });
});
afterAll(async () => {
  await app?.close();
  await store?.close();
  await etcd?.stop();
});

function post(payload: string) {
  return app.inject({
    method: "POST",
    url: "/v1/apply",
    headers: { "content-type": "application/json" },
    payload,
  });
}

describe("POST /v1/apply at scale", () => {
  it("applies 3,000 resources in one request on etcd's default limits", async () => {
    const resources = [];
    for (let i = 0; i < 1_500; i++) {
      resources.push({
        kind: "upstream",
        name: `u-${i}`,
        spec: { nodes: [{ address: `10.0.${i >> 8}.${i & 255}:80` }] },
      });
      resources.push({
        kind: "route",
        name: `r-${i}`,
        spec: { match: { pathPrefix: `/p/${i}` }, upstream: `u-${i}` },
      });
    }

    const response = await post(JSON.stringify({ resources }));

    expect(response.statusCode).toBe(200);
    expect(response.json().results).toHaveLength(3_000);
    // A page of the list, and how many follow it: every route written.
    const listed = (await app.inject({ method: "GET", url: "/v1/routes" })).json();
    expect(listed.items.length + listed.remainingItemCount).toBe(1_500);
  }, 120_000);

  it("answers 413 naming the limit for more resources than one apply may hold", async () => {
    const resources = Array.from({ length: APPLY_MAX_RESOURCES + 1 }, (_, i) => ({
      kind: "breaker",
      name: `b-${i}`,
      spec: {},
    }));

    const response = await post(JSON.stringify({ resources }));

    expect(response.statusCode).toBe(413);
    expect(response.json().error.code).toBe("CLAWGATE_PAYLOAD_TOO_LARGE");
    expect(response.json().error.message).toContain(`at most ${APPLY_MAX_RESOURCES}`);
  }, 60_000);

  it("answers 413 naming the limit for a body over it", async () => {
    const padding = "x".repeat(APPLY_BODY_LIMIT_BYTES);

    const response = await post(JSON.stringify({ resources: [], padding }));

    expect(response.statusCode).toBe(413);
    expect(response.json().error.code).toBe("CLAWGATE_PAYLOAD_TOO_LARGE");
    expect(response.json().error.message).toContain(`${APPLY_BODY_LIMIT_BYTES}-byte limit`);
    expect(response.json().error.message).toContain("POST /v1/apply");
  }, 60_000);

  it("answers 413, not 503, for one resource too big for an etcd transaction", async () => {
    // 20,000 key hashes: about 1.4 MB stored, over half of what etcd takes per request.
    const apiKeySha256 = Array.from({ length: 20_000 }, (_, i) => i.toString(16).padStart(64, "0"));

    const response = await post(
      JSON.stringify({ resources: [{ kind: "tenant", name: "huge", spec: { apiKeySha256 } }] }),
    );

    expect(response.statusCode).toBe(413);
    expect(response.json().error.message).toMatch(
      /tenants\/huge is \d+ bytes stored; one resource may be at most \d+ bytes/,
    );
  }, 60_000);
});
