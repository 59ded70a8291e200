import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "./embedded-store.js";
import { lockStoreFile } from "./store-lock.js";

let dir: string;
let store: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "clawgate-lock-"));
  store = join(dir, "store.json");
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe("lockStoreFile", () => {
  it("writes its holder next to the store and frees the file on release", async () => {
    const lock = await lockStoreFile(store);
    expect(lock.path).toBe(`${store}.lock`);
    const holder = JSON.parse(await readFile(lock.path, "utf8"));
    expect(holder).toMatchObject({ pid: process.pid, hostname: hostname() });
    expect(Date.parse(holder.startedAt)).not.toBeNaN();
    lock.release();
    await expect(readFile(lock.path)).rejects.toMatchObject({ code: "ENOENT" });
    (await lockStoreFile(store)).release();
  });

  it("refuses a live holder, naming the store, the PID and the host", async () => {
    const lock = await lockStoreFile(store);
    try {
      await expect(lockStoreFile(store)).rejects.toMatchObject({
        code: "CLAWGATE_STORE_LOCKED",
        message: expect.stringContaining(
          `${store} is in use by another control plane (pid ${process.pid} on host ${hostname()}`,
        ),
      });
    } finally {
      lock.release();
    }
  });

  it("never takes over a lock held on another host, whose PID it cannot check", async () => {
    await writeFile(
      `${store}.lock`,
      JSON.stringify({
        pid: 2 ** 22 + 1,
        hostname: "elsewhere",
        startedAt: "2026-01-01T00:00:00Z",
      }),
    );
    await expect(lockStoreFile(store)).rejects.toThrow(/pid 4194305 on host elsewhere/);
  });

  it("refuses a lock file it cannot read rather than guess", async () => {
    await writeFile(`${store}.lock`, "");
    await expect(lockStoreFile(store)).rejects.toThrow(`delete ${store}.lock`);
  });

  it("release leaves alone a lock another process took over meanwhile", async () => {
    const lock = await lockStoreFile(store);
    const other = JSON.stringify({ pid: 1, hostname: hostname(), startedAt: "later" });
    await writeFile(lock.path, other);
    lock.release();
    expect(await readFile(lock.path, "utf8")).toBe(other);
  });
});

describe("lockStoreFile after a restart in a container", () => {
  it("takes over a lock naming its own PID and host, which a previous life left", async () => {
    await writeFile(
      `${store}.lock`,
      JSON.stringify({ pid: process.pid, hostname: hostname(), startedAt: "2026-01-01T00:00:00Z" }),
    );
    const stale: number[] = [];
    const lock = await lockStoreFile(store, { onTakeover: (holder) => stale.push(holder.pid) });
    expect(stale).toEqual([process.pid]);
    lock.release();
  });
});

describe("the embedded store's file lock", () => {
  it("a second open of one file fails until the first store is closed", async () => {
    const first = await openEmbeddedStore({ path: store });
    await expect(openEmbeddedStore({ path: store })).rejects.toMatchObject({
      code: "CLAWGATE_STORE_LOCKED",
    });
    await first.close();
    await (await openEmbeddedStore({ path: store })).close();
  });
});
