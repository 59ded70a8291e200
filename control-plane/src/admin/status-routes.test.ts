import type { FastifyInstance } from "fastify";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigService } from "../resources/config-service.js";
import { SnapshotBuilder } from "../snapshot/snapshot-builder.js";
import type { SnapshotStatus, SnapshotStatusSource } from "../snapshot/snapshot-status.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const TOKEN = "readyz-test-token-0123456789";

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function app(
  store: Store,
  snapshot: SnapshotStatusSource,
  draining?: () => boolean,
): Promise<FastifyInstance> {
  const built = await buildAdminApp({
    config: new ConfigService(store, PREFIX),
    snapshot,
    fleet: { list: () => [] },
    token: TOKEN,
    draining,
  });
  cleanup.push(() => built.close());
  return built;
}

async function emptyStore(): Promise<Store> {
  const store = await openEmbeddedStore({});
  cleanup.push(() => store.close());
  return store;
}

function status(version: number): SnapshotStatus {
  return {
    version,
    published: version > 0,
    publishedVersion: version > 0 ? version : null,
    counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
  };
}

describe("GET /readyz on the admin port", () => {
  it("is 503 until the snapshot builder has read the store, then 200 with the version, no token", async () => {
    const store = await emptyStore();
    const builder = new SnapshotBuilder({
      store,
      prefix: PREFIX,
      logger: pino({ level: "silent" }),
    });
    cleanup.push(() => builder.stop());
    const admin = await app(store, builder);

    const before = await admin.inject({ method: "GET", url: "/readyz" });
    expect(before.statusCode).toBe(503);
    expect(before.json()).toEqual({
      status: "not ready",
      reason: "the store has not been read yet",
    });

    // An empty store is at revision 1, as a fresh etcd is: its empty config is published.
    await builder.start();
    expect(builder.status()).toMatchObject({ version: 1, published: true });
    const empty = await admin.inject({ method: "GET", url: "/readyz" });
    expect(empty.statusCode).toBe(200);
    expect(empty.json()).toEqual({ status: "ready", version: 1 });
    expect(empty.headers["cache-control"]).toBe("no-store");

    // The version follows the builder's reads.
    const reread = new Promise<void>((resolve) => {
      const off = builder.onStatus(() => {
        off();
        resolve();
      });
    });
    await store.commit([], [{ type: "put", key: `${PREFIX}breakers/b`, value: "{}" }]);
    await reread;
    const later = await admin.inject({ method: "GET", url: "/readyz" });
    expect(later.json()).toEqual({ status: "ready", version: builder.status().version });
    expect(builder.status().version).toBeGreaterThan(0);
  });

  it("falls back on version > 0 for a source that cannot say whether it has read", async () => {
    const store = await emptyStore();
    let current = status(0);
    const admin = await app(store, { status: () => current });
    expect((await admin.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(503);
    current = status(12);
    const ready = await admin.inject({ method: "GET", url: "/readyz" });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: "ready", version: 12 });
  });

  it("is 503 while draining, whatever the snapshot", async () => {
    const store = await emptyStore();
    let draining = false;
    const admin = await app(store, { status: () => status(12) }, () => draining);
    expect((await admin.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
    draining = true;
    const stopping = await admin.inject({ method: "GET", url: "/readyz" });
    expect(stopping.statusCode).toBe(503);
    expect(stopping.json()).toEqual({
      status: "not ready",
      reason: "draining: the process is stopping",
    });
  });

  it("needs no token, unlike the rest of the API", async () => {
    const store = await emptyStore();
    const admin = await app(store, { status: () => status(3) });
    expect((await admin.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
    expect((await admin.inject({ method: "GET", url: "/readyz?probe=1" })).statusCode).toBe(200);
    expect((await admin.inject({ method: "GET", url: "/v1/snapshot" })).statusCode).toBe(401);
  });
});
