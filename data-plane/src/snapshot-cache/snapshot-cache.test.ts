import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, type Snapshot, SnapshotSchema } from "@clawgate/proto";
import { afterEach, describe, expect, it } from "vitest";
import { SnapshotCache } from "./snapshot-cache.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-cache-"));
  dirs.push(dir);
  return dir;
}

const snapshot = (version: number): Snapshot =>
  create(SnapshotSchema, { version: BigInt(version), nonce: `n${version}` });

describe("SnapshotCache", () => {
  it("reports a missing file as missing, then loads what it saved (creating the dir)", async () => {
    const cache = new SnapshotCache(join(await tempDir(), "nested", "cache"));
    expect(await cache.load()).toMatchObject({ ok: false, kind: "missing" });
    expect(await cache.save(snapshot(7))).toEqual({ ok: true, version: 7 });
    const loaded = await cache.load();
    expect(loaded).toMatchObject({ ok: true, version: 7 });
  });

  it("leaves only the cache file behind: the temp file is renamed over it", async () => {
    const dir = await tempDir();
    const cache = new SnapshotCache(dir);
    await cache.save(snapshot(1));
    await cache.save(snapshot(2));
    expect(await readdir(dir)).toEqual(["snapshot.bin"]);
    expect(await cache.load()).toMatchObject({ ok: true, version: 2 });
  });

  it("coalesces saves that queue behind a write: the newest wins and all callers hear of it", async () => {
    const cache = new SnapshotCache(await tempDir());
    const results = await Promise.all([3, 4, 5, 6].map((v) => cache.save(snapshot(v))));
    expect(results[0]).toEqual({ ok: true, version: 3 });
    // 4 and 5 were replaced by 6 while 3 was being written.
    expect(results.slice(1)).toEqual([
      { ok: true, version: 6 },
      { ok: true, version: 6 },
      { ok: true, version: 6 },
    ]);
    expect(await cache.load()).toMatchObject({ ok: true, version: 6 });
  });

  it("reports a corrupt file as corrupt, with the path and the reason", async () => {
    const dir = await tempDir();
    const cache = new SnapshotCache(dir);
    await writeFile(cache.path, "garbage, not a snapshot at all, long enough to have a header!!!");
    const loaded = await cache.load();
    expect(loaded).toMatchObject({ ok: false, kind: "corrupt" });
    if (!loaded.ok) expect(loaded.reason).toContain(cache.path);
  });

  it("reports an unreadable path as an io failure and a failed write as a reason", async () => {
    const dir = await tempDir();
    const file = join(dir, "a-file");
    await writeFile(file, "x");
    // The cache dir is a regular file: reading and writing under it both fail.
    const cache = new SnapshotCache(file);
    expect(await cache.load()).toMatchObject({ ok: false, kind: "io" });
    const saved = await cache.save(snapshot(1));
    expect(saved.ok).toBe(false);
  });
});
