import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ManualScheduler } from "../remediation/manual-scheduler.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store, WatchHandlers } from "../store/store.js";
import { type PublishedSnapshot, SnapshotBuilder } from "./snapshot-builder.js";
import type { SnapshotStatus } from "./snapshot-status.js";

const PREFIX = "/clawgate/";

interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

function captureLogger() {
  const lines: LogLine[] = [];
  const logger = pino(
    { level: "debug" },
    { write: (line: string) => lines.push(JSON.parse(line)) },
  );
  return { logger, lines };
}

async function put(store: Store, path: string, doc: unknown): Promise<number> {
  const value = typeof doc === "string" ? doc : JSON.stringify(doc);
  const result = await store.commit([], [{ type: "put", key: `${PREFIX}${path}`, value }]);
  return result.revision;
}

function nextPublish(
  builder: SnapshotBuilder,
  accept: (published: PublishedSnapshot) => boolean,
): Promise<PublishedSnapshot> {
  const now = builder.current();
  if (now !== undefined && accept(now)) return Promise.resolve(now);
  return new Promise((resolve) => {
    const off = builder.onPublish((published) => {
      if (!accept(published)) return;
      off();
      resolve(published);
    });
  });
}

function nextStatus(
  builder: SnapshotBuilder,
  accept: (status: SnapshotStatus) => boolean,
): Promise<SnapshotStatus> {
  return new Promise((resolve) => {
    const off = builder.onStatus((status) => {
      if (!accept(status)) return;
      off();
      resolve(status);
    });
  });
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Lets the embedded store deliver the watch events of writes already made (it batches per tick). */
function delivered(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

async function setup(
  options: {
    store?: Store;
    coalesceMs?: number;
    maxDelayMs?: number;
    pacer?: ManualScheduler;
  } = {},
) {
  const store = options.store ?? (await openEmbeddedStore({}));
  const { logger, lines } = captureLogger();
  const builder = new SnapshotBuilder({
    store,
    prefix: PREFIX,
    logger,
    instanceId: "cp-test",
    coalesceMs: options.coalesceMs ?? 25,
    maxDelayMs: options.maxDelayMs ?? 250,
    retryMinMs: 1,
    retryMaxMs: 20,
    ...(options.pacer === undefined ? {} : { pacer: options.pacer }),
  });
  cleanups.push(async () => {
    await builder.stop();
    await store.close();
  });
  return { store, builder, lines };
}

describe("SnapshotBuilder", () => {
  it("publishes the state at start with the read's revision as version", async () => {
    const { store, builder } = await setup();
    await put(store, "upstreams/agents", { nodes: [{ address: "127.0.0.1:9001" }] });
    const revision = await put(store, "routes/api", {
      match: { pathPrefix: "/api" },
      upstream: "agents",
    });

    await builder.start();

    const published = builder.current();
    expect(published?.version).toBe(revision);
    expect(published?.nonce).toBe(`cp-test-${revision}`);
    expect(published?.snapshot.version).toBe(BigInt(revision));
    expect(published?.snapshot.routes.map((r) => r.name)).toEqual(["api"]);
    expect(published?.snapshot.upstreams[0]?.nodes[0]?.address).toBe("127.0.0.1:9001");
    // The first publish has nothing to be a delta from.
    expect(published?.delta).toBeUndefined();
    expect(builder.status()).toMatchObject({
      version: revision,
      published: true,
      publishedVersion: revision,
      counts: { routes: 1, upstreams: 1, breakers: 0, tenants: 0 },
    });
  });

  it("publishes an empty config at the store's revision, so data planes become ready", async () => {
    const { store, builder } = await setup();
    const { revision } = await store.range(PREFIX);
    await builder.start();

    expect(revision).toBeGreaterThan(0);
    expect(builder.current()?.version).toBe(revision);
    expect(builder.current()?.snapshot.routes).toEqual([]);
    expect(builder.status()).toMatchObject({
      version: revision,
      published: true,
      publishedVersion: revision,
      counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
    });
  });

  it("coalesces a burst of 100 writes into one build, the last holding everything", async () => {
    // The coalescing clock moves only when the test steps it: however slow the writes are, the
    // burst is one quiet window long.
    const pacer = new ManualScheduler();
    const { store, builder } = await setup({ pacer });
    await builder.start();
    const versions: number[] = [];
    builder.onPublish((published) => versions.push(published.version));

    let revision = 0;
    for (let i = 0; i < 100; i++) {
      revision = await put(store, `upstreams/u-${i}`, {
        nodes: [{ address: `10.0.0.1:${i + 1}` }],
      });
    }
    await delivered();
    expect(versions).toEqual([]);
    expect(pacer.pending()).toBe(1);
    const last = nextPublish(builder, (published) => published.version >= revision);
    pacer.advance(25);
    const published = await last;

    expect(published.version).toBe(revision);
    expect(published.snapshot.upstreams).toHaveLength(100);
    expect(versions).toEqual([revision]);
  });

  it("rebuilds a lone change at once after a quiet window, and one right after it coalesced", async () => {
    const pacer = new ManualScheduler();
    const { store, builder } = await setup({ coalesceMs: 25, pacer });
    await builder.start();
    const publishedAt: number[] = [];
    builder.onPublish(() => publishedAt.push(pacer.now()));
    pacer.advance(100);

    // Quiet since the start's build: due at once, no window to wait out.
    const lone = await put(store, "upstreams/lone", { nodes: [{ address: "127.0.0.1:9001" }] });
    await delivered();
    const first = nextPublish(builder, (published) => published.version >= lone);
    pacer.advance(0);
    expect((await first).version).toBe(lone);
    expect(publishedAt).toEqual([100]);

    // 5 ms after that build: this one waits its coalescing window, like a burst would.
    pacer.advance(5);
    const next = await put(store, "upstreams/next", { nodes: [{ address: "127.0.0.1:9002" }] });
    await delivered();
    pacer.advance(24);
    await delivered();
    expect(publishedAt).toEqual([100]);
    const second = nextPublish(builder, (published) => published.version >= next);
    pacer.advance(1);
    expect((await second).version).toBe(next);
    expect(publishedAt).toEqual([100, 130]);
  });

  it("rebuilds under a steady stream of writes no later than maxDelayMs", async () => {
    const pacer = new ManualScheduler();
    const { store, builder } = await setup({ coalesceMs: 50, maxDelayMs: 100, pacer });
    await builder.start();
    const publishedAt: number[] = [];
    builder.onPublish(() => publishedAt.push(pacer.now()));

    // Writes at 0, 40 and 80 ms, each inside the 50 ms quiet window of the one before, so a
    // plain debounce would wait until 130 ms; the maxDelayMs cap fires at 100 ms.
    for (let i = 0; i < 3; i++) {
      await put(store, `upstreams/u-${i}`, { nodes: [{ address: `10.0.0.1:${i + 1}` }] });
      await delivered();
      pacer.advance(i < 2 ? 40 : 19);
    }
    await delivered();
    expect(publishedAt).toEqual([]);
    pacer.advance(1);
    await vi.waitFor(() => expect(publishedAt).toEqual([100]));
  });

  it("does not publish an inconsistent state, says why, and publishes once it is fixed", async () => {
    const { store, builder, lines } = await setup();
    await put(store, "upstreams/agents", { nodes: [{ address: "127.0.0.1:9001" }] });
    const good = await put(store, "routes/api", { match: { pathPrefix: "/" }, upstream: "agents" });
    await builder.start();
    expect(builder.current()?.version).toBe(good);

    // Written straight into the store, around the admin API's checks.
    const refused = nextStatus(builder, (status) => status.version > good);
    await put(store, "routes/orphan", { match: { path: "/x" }, upstream: "missing" });
    const bad = await put(store, "breakers/broken", "{not json");
    const status = await refused;
    const latest =
      status.version === bad ? status : await nextStatus(builder, (s) => s.version === bad);

    expect(latest.published).toBe(false);
    expect(latest.publishedVersion).toBe(good);
    expect(latest.reason).toContain(`still serving version ${good}`);
    expect(latest.problems).toEqual(
      expect.arrayContaining([
        { key: `${PREFIX}routes/orphan`, message: expect.stringContaining("upstream missing") },
        { key: `${PREFIX}breakers/broken`, message: "invalid document: not JSON" },
      ]),
    );
    expect(builder.current()?.version).toBe(good);
    expect(builder.status()).toEqual(latest);
    expect(lines.some((line) => line.level === 40 && line.msg.includes("not published"))).toBe(
      true,
    );

    await store.commit([], [{ type: "delete", key: `${PREFIX}breakers/broken` }]);
    const fixed = await put(store, "upstreams/missing", { nodes: [{ address: "127.0.0.1:9002" }] });
    const published = await nextPublish(builder, (p) => p.version >= fixed);
    expect(published.version).toBe(fixed);
    expect(published.snapshot.routes.map((r) => r.upstream)).toEqual(["agents", "missing"]);
    expect(builder.status()).toMatchObject({
      version: fixed,
      published: true,
      publishedVersion: fixed,
    });
    expect(builder.status().problems).toBeUndefined();
  });

  it("does not publish what data planes would refuse; the previous snapshot stays", async () => {
    const { store, builder } = await setup();
    await put(store, "upstreams/agents", { nodes: [{ address: "127.0.0.1:9001" }] });
    let good = await put(store, "routes/api", { match: { pathPrefix: "/" }, upstream: "agents" });
    await builder.start();
    expect(builder.current()?.version).toBe(good);

    // Written around the API: each is a document data planes would NACK.
    for (const [path, doc] of [
      ["routes/api", { match: { pathPrefix: "/a b" }, upstream: "agents" }],
      ["routes/api", { match: { hosts: ["*"], pathPrefix: "/" }, upstream: "agents" }],
      ["upstreams/agents", { nodes: [{ address: "-x..y:80" }] }],
    ] as const) {
      const key = path.startsWith("routes") ? "routes/api" : "upstreams/agents";
      const refused = nextStatus(builder, (status) => status.version > good);
      const bad = await put(store, path, doc);
      const status = await refused;
      expect(status).toMatchObject({ version: bad, published: false, publishedVersion: good });
      expect(status.problems).toContainEqual({
        key: `${PREFIX}${key}`,
        message: expect.any(String),
      });
      expect(builder.current()?.version).toBe(good);
      // Put the good document back before the next case.
      const restored = await put(
        store,
        path,
        key === "routes/api"
          ? { match: { pathPrefix: "/" }, upstream: "agents" }
          : { nodes: [{ address: "127.0.0.1:9001" }] },
      );
      good = (await nextPublish(builder, (p) => p.version >= restored)).version;
    }
  });

  it("checks the whole snapshot with the shared validation before publishing it", async () => {
    // A clock past 2^53 ms makes createdAtMs something no data plane accepts; no document
    // check can see it, only checking the snapshot as a data plane will.
    const store = await openEmbeddedStore({});
    const { logger } = captureLogger();
    const builder = new SnapshotBuilder({
      store,
      prefix: PREFIX,
      logger,
      clock: () => 2 ** 60,
    });
    cleanups.push(async () => {
      await builder.stop();
      await store.close();
    });
    const revision = await put(store, "upstreams/agents", { nodes: [] });
    await builder.start();
    expect(builder.current()).toBeUndefined();
    expect(builder.status()).toMatchObject({
      version: revision,
      published: false,
      publishedVersion: null,
      reason: expect.stringContaining("nothing published yet"),
      problems: [{ key: PREFIX, message: expect.stringContaining("createdAtMs is beyond 2^53") }],
    });
  });

  it("publishes nothing when the first state is inconsistent", async () => {
    const { store, builder } = await setup();
    const revision = await put(store, "upstreams/agents", { breaker: "nope" });
    await builder.start();
    expect(builder.current()).toBeUndefined();
    expect(builder.status()).toMatchObject({
      version: revision,
      published: false,
      publishedVersion: null,
      problems: [{ key: `${PREFIX}upstreams/agents`, message: expect.stringContaining("nope") }],
    });
  });

  it("re-reads the store and re-watches after the watch fails", async () => {
    const inner = await openEmbeddedStore({});
    const flaky = breakableStore(inner);
    const { store, builder, lines } = await setup({ store: flaky.store });
    await put(store, "upstreams/agents", {});
    await builder.start();

    // The watch dies, changes land while nobody watches, and the store refuses reads twice.
    await flaky.breakWatches(new Error("mvcc: required revision has been compacted"));
    flaky.failRanges(2);
    const missed = await put(store, "upstreams/tools", {});

    const published = await nextPublish(builder, (p) => p.version >= missed);
    expect(published.snapshot.upstreams.map((u) => u.name)).toEqual(["agents", "tools"]);
    expect(lines.some((line) => line.msg.includes("config watch failed"))).toBe(true);
    expect(lines.some((line) => line.msg.includes("store still unavailable"))).toBe(true);

    // And the new watch delivers later changes.
    const later = await put(store, "upstreams/zeta", {});
    const again = await nextPublish(builder, (p) => p.version >= later);
    expect(again.snapshot.upstreams).toHaveLength(3);
  });

  it("publishes nothing new after a re-read that found the config unchanged; the next change goes whole", async () => {
    const inner = await openEmbeddedStore({});
    const flaky = breakableStore(inner);
    const { store, builder, lines } = await setup({ store: flaky.store });
    const created = await put(store, "upstreams/agents", {});
    await builder.start();
    const versions: number[] = [];
    builder.onPublish((published) => versions.push(published.version));

    // The watch dies; only keys no snapshot is built from are written until it is back.
    await flaky.breakWatches(new Error("mvcc: required revision has been compacted"));
    await put(store, "meta/dataplanes/cp-1/dp-1", "x");
    await vi.waitFor(
      () => expect(lines.some((line) => line.msg === "config watch re-established")).toBe(true),
      { timeout: 10_000 },
    );
    expect(builder.status()).toMatchObject({ version: created, publishedVersion: created });

    const changed = await put(store, "upstreams/tools", {});
    const published = await nextPublish(builder, (p) => p.version >= changed);
    expect(versions).toEqual([changed]);
    // What the data planes hold is not known to match the re-read: no delta from it.
    expect(published.delta).toBeUndefined();
  });
});

/** Wraps a store so a test can kill its watches and make range reads fail. */
function breakableStore(inner: Store) {
  const live = new Set<{ handlers: WatchHandlers; close(): Promise<void> }>();
  let rangeFailures = 0;
  const store: Store = {
    ...inner,
    kind: inner.kind,
    get: (key) => inner.get(key),
    commit: (compares, operations) => inner.commit(compares, operations),
    grantLease: (ttl) => inner.grantLease(ttl),
    refreshLease: (lease) => inner.refreshLease(lease),
    revokeLease: (lease) => inner.revokeLease(lease),
    close: () => inner.close(),
    async range(prefix) {
      if (rangeFailures > 0) {
        rangeFailures--;
        throw new Error("connection refused");
      }
      return inner.range(prefix);
    },
    async watch(prefix, fromRevision, handlers) {
      const watch = await inner.watch(prefix, fromRevision, handlers);
      const entry = { handlers, close: () => watch.close() };
      live.add(entry);
      return {
        async close() {
          live.delete(entry);
          await watch.close();
        },
      };
    },
  };
  return {
    store,
    async breakWatches(error: Error) {
      for (const entry of [...live]) {
        live.delete(entry);
        await entry.close();
        entry.handlers.onError?.(error);
      }
    },
    failRanges(count: number) {
      rangeFailures = count;
    },
  };
}
