import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store, WatchHandlers } from "../store/store.js";
import type { PublishedSnapshot } from "./published-snapshot.js";
import { SnapshotBuilder } from "./snapshot-builder.js";

const PREFIX = "/clawgate/";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function put(store: Store, path: string, doc: unknown): Promise<number> {
  const value = JSON.stringify(doc);
  return (await store.commit([], [{ type: "put", key: `${PREFIX}${path}`, value }])).revision;
}

async function remove(store: Store, path: string): Promise<number> {
  return (await store.commit([], [{ type: "delete", key: `${PREFIX}${path}` }])).revision;
}

function nextPublish(builder: SnapshotBuilder, version: number): Promise<PublishedSnapshot> {
  const now = builder.current();
  if (now !== undefined && now.version >= version) return Promise.resolve(now);
  return new Promise((resolve) => {
    const off = builder.onPublish((published) => {
      if (published.version < version) return;
      off();
      resolve(published);
    });
  });
}

/** Ten routes over three upstreams, a breaker and a tenant: enough for a delta to leave most out. */
async function seeded(store?: Store) {
  const own = store ?? (await openEmbeddedStore({}));
  for (const name of ["u-0", "u-1", "u-2"]) {
    await put(own, `upstreams/${name}`, {
      nodes: [{ address: "127.0.0.1:9001" }],
      breaker: "strict",
    });
  }
  await put(own, "breakers/strict", { consecutiveFailures: 3 });
  await put(own, "tenants/acme", {});
  for (let i = 0; i < 10; i++) {
    await put(own, `routes/r-${i}`, { match: { pathPrefix: `/r${i}` }, upstream: `u-${i % 3}` });
  }
  const builder = new SnapshotBuilder({
    store: own,
    prefix: PREFIX,
    logger: pino({ level: "silent" }),
    instanceId: "cp-test",
    coalesceMs: 0,
    maxDelayMs: 0,
    retryMinMs: 1,
    retryMaxMs: 20,
  });
  cleanups.push(async () => {
    await builder.stop();
    await own.close();
  });
  await builder.start();
  const first = builder.current();
  if (first === undefined) throw new Error("the seeded config was not published");
  return { store: own, builder, first };
}

/** Every resource a delta carries, as kind/name, removals marked with a leading "-". */
function contents(published: PublishedSnapshot): string[] {
  const delta = published.delta;
  if (delta === undefined) throw new Error(`version ${published.version} went out without a delta`);
  return [
    ...delta.routes.map((r) => `routes/${r.name}`),
    ...delta.upstreams.map((u) => `upstreams/${u.name}`),
    ...delta.breakers.map((b) => `breakers/${b.name}`),
    ...delta.tenants.map((t) => `tenants/${t.name}`),
    ...delta.removedRoutes.map((name) => `-routes/${name}`),
    ...delta.removedUpstreams.map((name) => `-upstreams/${name}`),
    ...delta.removedBreakers.map((name) => `-breakers/${name}`),
    ...delta.removedTenants.map((name) => `-tenants/${name}`),
  ];
}

describe("SnapshotBuilder deltas", () => {
  it("publishes a one-route change as a delta holding exactly that route", async () => {
    const { store, builder, first } = await seeded();
    expect(first.delta).toBeUndefined();
    expect(first.snapshot.routes).toHaveLength(10);

    const version = await put(store, "routes/r-4", {
      match: { pathPrefix: "/moved" },
      upstream: "u-2",
    });
    const published = await nextPublish(builder, version);

    expect(contents(published)).toEqual(["routes/r-4"]);
    const delta = published.delta;
    expect(delta?.routes[0]?.match?.pathPrefix).toBe("/moved");
    expect(delta?.routes[0]?.upstream).toBe("u-2");
    expect(delta?.version).toBe(BigInt(version));
    expect(delta?.baseVersion).toBe(BigInt(first.version));
    expect(delta?.nonce).toBe(published.nonce);
    expect(delta?.createdAtMs).toBe(published.snapshot.createdAtMs);
    // The whole snapshot is there too, with the change and everything else as it was.
    expect(published.snapshot.routes).toHaveLength(10);
    expect(published.snapshot.routes.find((r) => r.name === "r-4")?.match?.pathPrefix).toBe(
      "/moved",
    );
    expect(published.snapshot.routes.find((r) => r.name === "r-5")).toBe(
      first.snapshot.routes.find((r) => r.name === "r-5"),
    );
  });

  it("names a removed route in removedRoutes and leaves it out of the snapshot", async () => {
    const { store, builder, first } = await seeded();
    const version = await remove(store, "routes/r-7");
    const published = await nextPublish(builder, version);

    expect(contents(published)).toEqual(["-routes/r-7"]);
    expect(published.delta?.baseVersion).toBe(BigInt(first.version));
    expect(published.snapshot.routes.map((r) => r.name)).not.toContain("r-7");
    expect(published.snapshot.routes).toHaveLength(9);
  });

  it("sends an upstream again, with its merged nodes, when one of its registered nodes changes", async () => {
    const { store, builder } = await seeded();
    const registration = {
      address: "127.0.0.1:9100",
      weight: 5,
      ttlSeconds: 10,
      registeredAt: "2026-01-01T00:00:00Z",
    };
    const added = await store.commit(
      [],
      [{ type: "put", key: `${PREFIX}registry/u-1/n1`, value: JSON.stringify(registration) }],
    );
    const published = await nextPublish(builder, added.revision);
    expect(contents(published)).toEqual(["upstreams/u-1"]);
    expect(
      published.delta?.upstreams[0]?.nodes.map((n) => [n.address, n.weight, n.source]),
    ).toEqual([
      ["127.0.0.1:9001", 1, "config"],
      ["127.0.0.1:9100", 5, "registry"],
    ]);

    const moved = await store.commit(
      [],
      [
        {
          type: "put",
          key: `${PREFIX}registry/u-1/n1`,
          value: JSON.stringify({ ...registration, weight: 9 }),
        },
      ],
    );
    const again = await nextPublish(builder, moved.revision);
    expect(contents(again)).toEqual(["upstreams/u-1"]);
    expect(again.delta?.upstreams[0]?.nodes[1]?.weight).toBe(9);
    expect(again.delta?.baseVersion).toBe(BigInt(published.version));
  });

  it("after a refused version, the next delta holds everything since the last published one", async () => {
    const { store, builder, first } = await seeded();
    // Written around the API: a route to a missing upstream holds back the next versions.
    await put(store, "routes/orphan", { match: { path: "/o" }, upstream: "ghost" });
    await put(store, "tenants/acme", { requestsPerMinute: 10 });
    expect(builder.current()).toBe(first);
    const fixed = await put(store, "upstreams/ghost", { nodes: [] });
    const published = await nextPublish(builder, fixed);

    expect(contents(published).sort()).toEqual([
      "routes/orphan",
      "tenants/acme",
      "upstreams/ghost",
    ]);
    expect(published.delta?.baseVersion).toBe(BigInt(first.version));
  });

  it("after a relist (the watch was compacted), publishes the whole state without a delta", async () => {
    const inner = await openEmbeddedStore({ historyLimit: 2 });
    const killable = killableWatches(inner);
    const { store, builder, first } = await seeded(killable.store);

    // The watch dies; meanwhile a route goes, another changes and the history is compacted.
    killable.pause();
    await remove(inner, "routes/r-1");
    await put(inner, "routes/r-2", { match: { pathPrefix: "/relisted" }, upstream: "u-0" });
    let last = 0;
    for (let i = 0; i < 3; i++) last = await put(inner, `tenants/t-${i}`, {});
    await killable.fail(new Error("mvcc: required revision has been compacted"));

    const published = await nextPublish(builder, last);
    expect(published.delta).toBeUndefined();
    expect(published.version).toBe(last);
    expect(published.snapshot.routes.map((r) => r.name)).toEqual(
      first.snapshot.routes.map((r) => r.name).filter((name) => name !== "r-1"),
    );
    expect(published.snapshot.routes.find((r) => r.name === "r-2")?.match?.pathPrefix).toBe(
      "/relisted",
    );
    expect(published.snapshot.tenants.map((t) => t.name)).toEqual(["acme", "t-0", "t-1", "t-2"]);

    // Deltas resume from the relisted version.
    const after = await put(store, "routes/r-3", {
      match: { pathPrefix: "/later" },
      upstream: "u-0",
    });
    const next = await nextPublish(builder, after);
    expect(contents(next)).toEqual(["routes/r-3"]);
    expect(next.delta?.baseVersion).toBe(BigInt(published.version));
  });
});

/**
 * Wraps a store so a test can stop its watches delivering (as a broken connection does) and
 * then fail them with an error, as etcd does when the revision they would resume at is gone.
 */
function killableWatches(inner: Store) {
  const live = new Set<{ handlers: WatchHandlers; close(): Promise<void> }>();
  const store: Store = {
    ...inner,
    kind: inner.kind,
    async watch(prefix, fromRevision, handlers) {
      const entry: { handlers: WatchHandlers; close(): Promise<void> } = {
        handlers,
        close: async () => {},
      };
      const watch = await inner.watch(prefix, fromRevision, {
        onEvents: (events) => {
          if (live.has(entry)) handlers.onEvents(events);
        },
        onError: (error) => handlers.onError?.(error),
      });
      entry.close = () => watch.close();
      live.add(entry);
      return {
        async close() {
          live.delete(entry);
          await watch.close();
        },
      };
    },
  };
  let paused: { handlers: WatchHandlers; close(): Promise<void> }[] = [];
  return {
    store,
    pause() {
      paused = [...live];
      for (const entry of paused) live.delete(entry);
    },
    async fail(error: Error) {
      for (const entry of paused) {
        await entry.close();
        entry.handlers.onError?.(error);
      }
      paused = [];
    },
  };
}
