import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, type Snapshot, SnapshotSchema } from "@clawgate/proto";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { deltaOf, routeAt, snapshotOf } from "../testing/delta-fixture.js";
import { CacheMetrics } from "./cache-metrics.js";
import { type CacheApplyResult, LastGoodSnapshot } from "./last-good-snapshot.js";
import { SnapshotCache } from "./snapshot-cache.js";
import { snapshotWithDelta } from "./snapshot-with-delta.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

const snapshot = (version: number): Snapshot =>
  create(SnapshotSchema, { version: BigInt(version), nonce: `n${version}` });

async function setup(
  options: {
    fallbackAfterMs?: number;
    refuse?: boolean;
    saveDelayMs?: number;
    /** Replaces the apply (one that takes turns, as with workers); default a synchronous one. */
    apply?: (s: Snapshot) => Promise<CacheApplyResult | undefined>;
  } = {},
) {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-lastgood-"));
  dirs.push(dir);
  const registry = new Registry();
  const cache = new SnapshotCache(dir);
  const logs: string[] = [];
  /** The fields logged with each line of `logs`. */
  const fields: object[] = [];
  let serving: number | undefined;
  let fromCache: (version: number) => void = () => {};
  const servedFromCache = new Promise<number>((resolve) => {
    fromCache = resolve;
  });
  let settled = () => {};
  const logged = new Promise<void>((resolve) => {
    settled = resolve;
  });
  const log = (level: string) => (obj: object, msg: string) => {
    logs.push(`${level}: ${msg}`);
    fields.push(obj);
    settled();
  };
  const lastGood = new LastGoodSnapshot({
    cache,
    metrics: new CacheMetrics(registry),
    logger: { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") },
    fallbackAfterMs: options.fallbackAfterMs ?? 10,
    hasSnapshot: () => serving !== undefined,
    apply: (s) => {
      if (options.apply) return options.apply(s);
      if (options.refuse) return { ok: false, reason: "route r uses unknown upstream u" };
      serving = Number(s.version);
      return { ok: true };
    },
    onServedFromCache: (version) => fromCache(version),
    saveDelayMs: options.saveDelayMs,
  });
  return {
    cache,
    lastGood,
    logs,
    fields,
    logged,
    servedFromCache,
    serving: () => serving,
    deliver: (s: Snapshot) => {
      serving = Number(s.version);
      lastGood.delivered(s);
    },
    metrics: () => registry.metrics(),
  };
}

describe("LastGoodSnapshot", () => {
  it("writes a burst of deliveries once, the newest, and what is pending at stop", async () => {
    const t = await setup({ saveDelayMs: 60_000 });
    const saved: bigint[] = [];
    const save = t.cache.save.bind(t.cache);
    t.cache.save = (s: Snapshot) => {
      saved.push(s.version);
      return save(s);
    };
    for (let version = 20; version <= 30; version++) t.deliver(snapshot(version));
    // Nothing is encoded or written per delivery; stop() writes the newest, once.
    expect(saved).toEqual([]);
    await t.lastGood.stop();
    expect(saved).toEqual([30n]);
    const loaded = await t.cache.load();
    expect(loaded.ok && loaded.version).toBe(30);
  });

  it("writes each delivered snapshot, and a restart with no control plane serves it", async () => {
    const first = await setup();
    first.deliver(snapshot(12));
    await first.lastGood.stop(); // flushes the write
    expect(await first.metrics()).toContain("clawgate_snapshot_cache_version 12");

    // The next process: same directory, no control plane.
    const second = await setup();
    const restarted = new LastGoodSnapshot({
      cache: first.cache,
      metrics: new CacheMetrics(new Registry()),
      logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
      fallbackAfterMs: 10,
      hasSnapshot: () => second.serving() !== undefined,
      apply: (s) => {
        second.deliver(s);
        return { ok: true };
      },
      onServedFromCache: (version) => served(version),
    });
    let served: (version: number) => void = () => {};
    const version = new Promise<number>((resolve) => {
      served = resolve;
    });
    restarted.start();
    expect(await version).toBe(12);
    expect(second.serving()).toBe(12);
    await restarted.stop();
    await second.lastGood.stop();
  });

  it("writes a burst of deltas as one append, and a restart with no control plane serves the last", async () => {
    const first = await setup({ saveDelayMs: 60_000 });
    const whole = snapshotOf(1, 30, 3);
    await first.cache.save(whole);
    let expected = whole;
    let wholeAsked = 0;
    for (let version = 2; version <= 6; version++) {
      const delta = deltaOf(version, { routes: [routeAt(version, 3, 1, `/d${version}`)] });
      expected = snapshotWithDelta(expected, delta);
      const now = expected;
      first.lastGood.deliveredDelta(delta, () => {
        wholeAsked++;
        return now;
      });
    }
    await first.lastGood.stop();
    // On top of the whole file on disk: appended, never encoded whole.
    expect(wholeAsked).toBe(0);
    expect(await first.metrics()).toContain("clawgate_snapshot_cache_version 6");

    const second = await setup({ fallbackAfterMs: 10 });
    const restarted = new LastGoodSnapshot({
      cache: new SnapshotCache(first.cache.dir),
      metrics: new CacheMetrics(new Registry()),
      logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
      fallbackAfterMs: 10,
      hasSnapshot: () => false,
      apply: (s) => {
        served(s);
        return { ok: true };
      },
    });
    let served: (s: Snapshot) => void = () => {};
    const servedSnapshot = new Promise<Snapshot>((resolve) => {
      served = resolve;
    });
    restarted.start();
    const loaded = await servedSnapshot;
    expect(loaded.version).toBe(6n);
    expect(loaded.routes.map((r) => `${r.name}${r.match?.path}`)).toEqual(
      expected.routes.map((r) => `${r.name}${r.match?.path}`),
    );
    await restarted.stop();
    await second.lastGood.stop();
  });

  it("serves the cache after the wait, reports it, and a later delivery switches it off", async () => {
    const t = await setup();
    await t.cache.save(snapshot(5));
    t.lastGood.start();
    expect(await t.servedFromCache).toBe(5);
    expect(t.serving()).toBe(5);
    expect(await t.metrics()).toContain("clawgate_snapshot_from_cache 1");
    t.deliver(snapshot(6));
    expect(await t.metrics()).toContain("clawgate_snapshot_from_cache 0");
    await t.lastGood.stop();
    expect(await t.cache.load()).toMatchObject({ ok: true, version: 6 });
  });

  it("never replaces a snapshot a control plane delivered in time", async () => {
    const t = await setup({ fallbackAfterMs: 30 });
    await t.cache.save(snapshot(5));
    t.lastGood.start();
    t.deliver(snapshot(9));
    await t.logged;
    await t.lastGood.stop();
    expect(t.logs).toEqual(["debug: a control plane answered in time; the cache is not needed"]);
    expect(t.serving()).toBe(9);
    expect(await t.metrics()).toContain("clawgate_snapshot_from_cache 0");
  });

  it("logs and counts a corrupt file, and serves nothing", async () => {
    const t = await setup();
    await writeFile(t.cache.path, Buffer.alloc(100, 7));
    t.lastGood.start();
    await t.logged;
    await t.lastGood.stop();
    expect(t.serving()).toBeUndefined();
    expect(t.logs).toEqual([
      "error: ignoring the snapshot cache: it cannot be used; waiting for a control plane",
    ]);
    expect(await t.metrics()).toContain(
      'clawgate_snapshot_cache_errors_total{kind="load-corrupt"} 1',
    );
  });

  it("logs and counts a cached snapshot that no longer compiles", async () => {
    const t = await setup({ refuse: true });
    await t.cache.save(snapshot(5));
    t.lastGood.start();
    await t.logged;
    await t.lastGood.stop();
    expect(t.logs[0]).toContain("does not compile");
    expect(await t.metrics()).toContain(
      'clawgate_snapshot_cache_errors_total{kind="load-rejected"} 1',
    );
  });

  it("with an apply that takes turns (in workers), says the cache serves only once it applied", async () => {
    let finish!: (result: CacheApplyResult) => void;
    let applying!: () => void;
    const started = new Promise<void>((resolve) => {
      applying = resolve;
    });
    const t = await setup({
      apply: () => {
        applying();
        return new Promise((resolve) => {
          finish = resolve;
        });
      },
    });
    await t.cache.save(snapshot(5));
    let served = false;
    void t.servedFromCache.then(() => {
      served = true;
    });
    t.lastGood.start();
    await started;
    await new Promise((resolve) => setImmediate(resolve));
    expect(served).toBe(false);
    expect(t.logs).toEqual([]);
    finish({ ok: true });
    expect(await t.servedFromCache).toBe(5);
    expect(t.logs).toEqual(["warn: no control plane answered; serving the cached snapshot"]);
    expect(await t.metrics()).toContain("clawgate_snapshot_from_cache 1");
    await t.lastGood.stop();
  });

  it("serves nothing and says why when the workers refuse the cached snapshot", async () => {
    const t = await setup({
      apply: async () => ({ ok: false, reason: "worker 2: route r uses unknown upstream u" }),
    });
    await t.cache.save(snapshot(5));
    t.lastGood.start();
    await t.logged;
    await t.lastGood.stop();
    expect(t.logs).toEqual([
      "error: ignoring the cached snapshot: it does not compile; waiting for a control plane",
    ]);
    expect(t.fields[0]).toMatchObject({
      version: 5,
      reason: "worker 2: route r uses unknown upstream u",
    });
    expect(await t.metrics()).toContain("clawgate_snapshot_from_cache 0");
  });

  it("serves nothing, and counts no error, when a control plane's snapshot got in first", async () => {
    const t = await setup({ apply: async () => undefined });
    await t.cache.save(snapshot(5));
    t.lastGood.start();
    await t.logged;
    await t.lastGood.stop();
    expect(t.logs).toEqual(["debug: a control plane answered first; the cache is not needed"]);
    expect(await t.metrics()).not.toContain('kind="load-rejected"} 1');
  });

  it("says so when there is no cache yet", async () => {
    const t = await setup();
    t.lastGood.start();
    await t.logged;
    await t.lastGood.stop();
    expect(t.logs).toEqual(["info: no cached snapshot; waiting for a control plane"]);
  });
});
