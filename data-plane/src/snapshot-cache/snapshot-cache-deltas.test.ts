import { mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, type Snapshot, SnapshotSchema } from "@clawgate/proto";
import { afterEach, describe, expect, it } from "vitest";
import { deltaOf, routeAt, snapshotOf } from "../testing/delta-fixture.js";
import { SnapshotCache } from "./snapshot-cache.js";
import { snapshotWithDelta } from "./snapshot-with-delta.js";

const dirs: string[] = [];
const caches: SnapshotCache[] = [];
afterEach(async () => {
  for (const cache of caches.splice(0)) await cache.close();
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function newCache(dir?: string): Promise<SnapshotCache> {
  const at = dir ?? (await mkdtemp(join(tmpdir(), "clawgate-deltas-")));
  if (dir === undefined) dirs.push(at);
  const cache = new SnapshotCache(at);
  caches.push(cache);
  return cache;
}

/** Deltas 2..n+1 on snapshotOf(1), each changing one route, and the whole snapshot after each. */
function changes(n: number, routes = 20): { delta: ReturnType<typeof deltaOf>; whole: Snapshot }[] {
  let whole = snapshotOf(1, routes, 3);
  return Array.from({ length: n }, (_, i) => {
    const delta = deltaOf(i + 2, { routes: [routeAt(i % 25, 3, 1, `/v${i}`)] });
    whole = create(SnapshotSchema, snapshotWithDelta(whole, delta));
    return { delta, whole };
  });
}

const names = (snapshot: Snapshot) => snapshot.routes.map((r) => `${r.name}${r.match?.path}`);

describe("SnapshotCache with deltas", () => {
  it("appends each delta behind the whole file, and loads the version the last one led to", async () => {
    const cache = await newCache();
    await cache.save(snapshotOf(1, 80, 3));
    const wholeSize = (await stat(cache.path)).size;
    const steps = changes(5, 80);
    let asked = 0;
    for (const { delta, whole } of steps) {
      const saved = await cache.saveDeltas([delta], () => {
        asked++;
        return whole;
      });
      expect(saved).toEqual({ ok: true, version: Number(whole.version) });
    }
    // Five records stay under a quarter of the whole file: none needed the whole snapshot.
    expect(asked).toBe(0);
    // The whole file was not written again: only the log grew.
    expect((await stat(cache.path)).size).toBe(wholeSize);
    expect((await readdir(cache.dir)).sort()).toEqual(["deltas.log", "snapshot.bin"]);
    const loaded = await cache.load();
    if (!loaded.ok) throw new Error(loaded.reason);
    expect(loaded.version).toBe(6);
    expect(loaded.ignored).toBeUndefined();
    expect(names(loaded.snapshot)).toEqual(names(steps[4]!.whole));
  });

  it("answers a save whose whole snapshot cannot be put together with the reason, and goes on", async () => {
    const cache = await newCache();
    const [a, b] = changes(2);
    const failed = await cache.saveDeltas([a!.delta], () => {
      throw new Error("superseded");
    });
    expect(failed).toMatchObject({ ok: false, reason: expect.stringContaining("superseded") });
    expect(await cache.saveDeltas([b!.delta], () => b!.whole)).toEqual({ ok: true, version: 3 });
  });

  it("ignores a torn tail: the deltas before it are served, the torn one never", async () => {
    const cache = await newCache();
    await cache.save(snapshotOf(1, 20, 3));
    const steps = changes(3);
    for (const { delta, whole } of steps) await cache.saveDeltas([delta], () => whole);
    await cache.close();
    // A crash in the middle of the third append: its last bytes never reached the disk.
    const size = (await stat(cache.logPath)).size;
    await truncate(cache.logPath, size - 5);
    const loaded = await (await newCache(cache.dir)).load();
    if (!loaded.ok) throw new Error(loaded.reason);
    expect(loaded.version).toBe(3);
    expect(names(loaded.snapshot)).toEqual(names(steps[1]!.whole));
    expect(loaded.ignored).toContain("torn record");
  });

  it("ignores a record whose bytes do not match its checksum, and all after it", async () => {
    const cache = await newCache();
    await cache.save(snapshotOf(1, 20, 3));
    for (const { delta, whole } of changes(2)) await cache.saveDeltas([delta], () => whole);
    await cache.close();
    const log = await readFile(cache.logPath);
    log[log.length - 3]! ^= 0xff;
    await writeFile(cache.logPath, log);
    const loaded = await (await newCache(cache.dir)).load();
    expect(loaded).toMatchObject({ ok: true, version: 2 });
    if (loaded.ok) expect(loaded.ignored).toContain("checksum mismatch");
  });

  it("writes whole again once the log passes its share, and drops the log", async () => {
    const cache = await newCache();
    await cache.save(snapshotOf(1, 20, 3));
    const wholeSize = (await stat(cache.path)).size;
    let compacted = 0;
    let last: Snapshot | undefined;
    for (const { delta, whole } of changes(80)) {
      last = whole;
      await cache.saveDeltas([delta], () => {
        compacted++;
        return whole;
      });
      const log = await stat(cache.logPath).catch(() => undefined);
      // Never much past a quarter of the whole file (one record at most past it).
      expect(log?.size ?? 0).toBeLessThan(wholeSize * 0.25 + 200);
    }
    expect(compacted).toBeGreaterThan(0);
    const loaded = await cache.load();
    if (!loaded.ok) throw new Error(loaded.reason);
    expect(loaded.version).toBe(81);
    expect(names(loaded.snapshot)).toEqual(names(last!));
  });

  it("writes whole first in a new process, and when a delta is not on what is on disk", async () => {
    const dir = (await newCache()).dir;
    const first = await newCache(dir);
    await first.save(snapshotOf(1, 20, 3));
    const [a, b, c] = changes(3);
    await first.saveDeltas([a!.delta], () => a!.whole);
    await first.close();
    // A restarted data plane does not know what the log ends with: it writes whole.
    const second = await newCache(dir);
    let asked = 0;
    await second.saveDeltas([b!.delta], () => {
      asked++;
      return b!.whole;
    });
    expect(asked).toBe(1);
    expect(await readdir(dir)).toEqual(["snapshot.bin"]);
    // A delta skipping a version (c on b's version, while the disk holds a's) is written whole.
    await second.saveDeltas([c!.delta], () => c!.whole);
    const skip = deltaOf(9, { routes: [routeAt(1, 3, 2)] });
    const skipWhole = create(SnapshotSchema, { ...c!.whole, version: 9n });
    await second.saveDeltas([skip], () => {
      asked++;
      return skipWhole;
    });
    expect(asked).toBe(2);
    expect(await second.load()).toMatchObject({ ok: true, version: 9 });
  });

  it("ignores deltas older than the whole file (a crash between its rename and the log's removal)", async () => {
    const cache = await newCache();
    await cache.save(snapshotOf(1, 20, 3));
    const steps = changes(2);
    for (const { delta, whole } of steps) await cache.saveDeltas([delta], () => whole);
    await cache.close();
    const log = await readFile(cache.logPath);
    await cache.save(steps[1]!.whole);
    await cache.close();
    await writeFile(cache.logPath, log);
    const loaded = await (await newCache(cache.dir)).load();
    expect(loaded).toMatchObject({ ok: true, version: 3 });
    if (loaded.ok) expect(loaded.ignored).toContain("not on 3");
  });
});
