import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store, Watch, WatchEvent } from "./store.js";

/** Upper bound for any wait on an event; etcd checks lease expiry about every 500 ms. */
const EVENT_TIMEOUT_MS = 10_000;

export interface WatchProbe {
  /** Every event received so far, in delivery order. */
  events: WatchEvent[];
  errors: Error[];
  /** Resolves once `predicate` holds for the events seen so far; rejects after a bound. */
  waitFor(predicate: (events: WatchEvent[]) => boolean, what: string): Promise<WatchEvent[]>;
  /** Resolves with the first error the watch reports. */
  nextError(): Promise<Error>;
  close(): Promise<void>;
}

/** Opens a watch that records what it receives, so tests can await events instead of sleeping. */
export async function probeWatch(
  store: Store,
  prefix: string,
  fromRevision: number,
): Promise<WatchProbe> {
  const events: WatchEvent[] = [];
  const errors: Error[] = [];
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const listener of [...listeners]) listener();
  };
  const watch: Watch = await store.watch(prefix, fromRevision, {
    onEvents(batch) {
      events.push(...batch);
      notify();
    },
    onError(error) {
      errors.push(error);
      notify();
    },
  });
  const until = <T>(check: () => T | undefined, describe: () => string): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const listener = () => {
        const result = check();
        if (result === undefined) return;
        cleanup();
        resolve(result);
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(describe()));
      }, EVENT_TIMEOUT_MS);
      const cleanup = () => {
        clearTimeout(timer);
        listeners.delete(listener);
      };
      listeners.add(listener);
      listener();
    });
  return {
    events,
    errors,
    waitFor: (predicate, what) =>
      until(
        () => (predicate(events) ? events : undefined),
        () =>
          `timed out after ${EVENT_TIMEOUT_MS} ms waiting for ${what}; saw ${JSON.stringify(events)}${
            errors.length > 0 ? ` and errors ${errors.map((e) => e.message).join("; ")}` : ""
          }`,
      ),
    nextError: () =>
      until(
        () => errors[0],
        () => `timed out after ${EVENT_TIMEOUT_MS} ms waiting for a watch error`,
      ),
    close: () => watch.close(),
  };
}

/**
 * The behaviour every Store must share, run against each implementation. Each test works
 * under its own random prefix, so the suite can share one store (and one etcd) throughout.
 */
export interface FreshStore {
  store: Store;
  /** Closes the store and removes whatever it was started with (a process, a directory). */
  dispose(): Promise<void>;
}

export function describeStoreContract(
  name: string,
  open: () => Promise<Store>,
  /** A store nothing was ever written to; the shared one above has history. */
  openFresh: () => Promise<FreshStore>,
): void {
  describe(`${name} store contract`, () => {
    let store: Store;
    const fresh = () => `/contract/${randomBytes(6).toString("hex")}/`;

    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await store?.close();
    });

    describe("a fresh store", () => {
      // An empty config must read at a version the snapshot builder publishes, on both stores.
      it("reads empty at revision 1, as a fresh etcd does, and the first write makes 2", async () => {
        const fresh = await openFresh();
        try {
          expect(await fresh.store.range("/")).toEqual({ revision: 1, items: [] });
          const probe = await probeWatch(fresh.store, "/", 1);
          try {
            const put = await fresh.store.commit([], [{ type: "put", key: "/k", value: "v" }]);
            expect(put).toEqual({ succeeded: true, revision: 2 });
            const events = await probe.waitFor((e) => e.length >= 1, "the first put");
            expect(events).toEqual([{ type: "put", key: "/k", value: "v", modRevision: 2 }]);
          } finally {
            await probe.close();
          }
        } finally {
          await fresh.dispose();
        }
      });
    });

    describe("range and get", () => {
      it("reads every key under a prefix at the revision of the last write", async () => {
        const p = fresh();
        const outside = `${p.slice(0, -1)}0`;
        await store.commit([], [{ type: "put", key: outside, value: "not mine" }]);
        const first = await store.commit(
          [],
          [
            { type: "put", key: `${p}b`, value: "2" },
            { type: "put", key: `${p}a`, value: "1" },
          ],
        );
        const second = await store.commit([], [{ type: "put", key: `${p}c`, value: "3" }]);

        const result = await store.range(p);

        expect(result.revision).toBe(second.revision);
        expect(result.items.map((kv) => [kv.key, kv.value, kv.modRevision])).toEqual([
          [`${p}a`, "1", first.revision],
          [`${p}b`, "2", first.revision],
          [`${p}c`, "3", second.revision],
        ]);
        for (const kv of result.items) expect(kv.modRevision).toBeLessThanOrEqual(result.revision);
      });

      it("reads several prefixes in one read, each sorted, leaving the rest out", async () => {
        const p = fresh();
        await store.commit(
          [],
          [
            { type: "put", key: `${p}x/2`, value: "x2" },
            { type: "put", key: `${p}x/1`, value: "x1" },
            { type: "put", key: `${p}y/1`, value: "y1" },
            { type: "put", key: `${p}z/1`, value: "not asked for" },
          ],
        );
        const last = await store.commit([], [{ type: "put", key: `${p}a/1`, value: "a1" }]);

        const result = await store.range([`${p}x/`, `${p}a/`, `${p}y/`]);

        expect(result.revision).toBe(last.revision);
        expect(result.items.map((kv) => kv.value)).toEqual(["x1", "x2", "a1", "y1"]);
      });

      it("reads keys and revisions without values when asked for keys only", async () => {
        const p = fresh();
        const first = await store.commit([], [{ type: "put", key: `${p}a`, value: "big" }]);
        const second = await store.commit([], [{ type: "put", key: `${p}b`, value: "bigger" }]);

        const result = await store.range(p, { keysOnly: true });

        expect(
          result.items.map(({ key, value, modRevision }) => ({ key, value, modRevision })),
        ).toEqual([
          { key: `${p}a`, value: "", modRevision: first.revision },
          { key: `${p}b`, value: "", modRevision: second.revision },
        ]);
        expect((await store.range(p)).items.map((kv) => kv.value)).toEqual(["big", "bigger"]);
      });

      it("gets one key with its create and mod revisions", async () => {
        const p = fresh();
        const created = await store.commit([], [{ type: "put", key: `${p}k`, value: "v1" }]);
        const updated = await store.commit([], [{ type: "put", key: `${p}k`, value: "v2" }]);

        const kv = await store.get(`${p}k`);

        expect(kv).toMatchObject({
          key: `${p}k`,
          value: "v2",
          createRevision: created.revision,
          modRevision: updated.revision,
        });
        expect(kv?.lease).toBeUndefined();
        expect(await store.get(`${p}missing`)).toBeUndefined();
      });
    });

    describe("commit", () => {
      it("creates a key only if it is absent (compare modRevision 0)", async () => {
        const p = fresh();
        const create = () =>
          store.commit(
            [{ key: `${p}k`, modRevision: 0 }],
            [{ type: "put", key: `${p}k`, value: "mine" }],
          );

        const first = await create();
        const second = await create();

        expect(first.succeeded).toBe(true);
        expect(second.succeeded).toBe(false);
        expect(second.revision).toBe(first.revision);
      });

      it("updates a key only at the revision the caller read", async () => {
        const p = fresh();
        const put = await store.commit([], [{ type: "put", key: `${p}k`, value: "v1" }]);

        const update = await store.commit(
          [{ key: `${p}k`, modRevision: put.revision }],
          [{ type: "put", key: `${p}k`, value: "v2" }],
        );
        const stale = await store.commit(
          [{ key: `${p}k`, modRevision: put.revision }],
          [{ type: "put", key: `${p}k`, value: "v3" }],
        );

        expect(update.succeeded).toBe(true);
        expect(update.revision).toBeGreaterThan(put.revision);
        expect(stale.succeeded).toBe(false);
        expect((await store.get(`${p}k`))?.value).toBe("v2");
      });

      it("writes nothing and keeps the revision when any compare fails", async () => {
        const p = fresh();
        const put = await store.commit([], [{ type: "put", key: `${p}a`, value: "1" }]);
        const before = await store.range(p);

        const result = await store.commit(
          [
            { key: `${p}a`, modRevision: put.revision },
            { key: `${p}b`, modRevision: 12345 },
          ],
          [
            { type: "put", key: `${p}a`, value: "changed" },
            { type: "put", key: `${p}c`, value: "new" },
          ],
        );

        expect(result).toEqual({ succeeded: false, revision: before.revision });
        expect(await store.range(p)).toEqual(before);
      });

      it("applies a put and a delete together at one revision", async () => {
        const p = fresh();
        const setup = await store.commit([], [{ type: "put", key: `${p}old`, value: "x" }]);

        const result = await store.commit(
          [{ key: `${p}old`, modRevision: setup.revision }],
          [
            { type: "put", key: `${p}new`, value: "y" },
            { type: "delete", key: `${p}old` },
          ],
        );

        expect(result.succeeded).toBe(true);
        expect(result.revision).toBe(setup.revision + 1);
        const after = await store.range(p);
        expect(after.items.map((kv) => [kv.key, kv.modRevision])).toEqual([
          [`${p}new`, result.revision],
        ]);
      });

      it("only ever grows the revision", async () => {
        const p = fresh();
        const revisions: number[] = [];
        for (let i = 0; i < 5; i++) {
          const op =
            i % 2 === 0
              ? ({ type: "put", key: `${p}k`, value: String(i) } as const)
              : ({ type: "delete", key: `${p}k` } as const);
          revisions.push((await store.commit([], [op])).revision);
          revisions.push((await store.range(p)).revision);
        }
        for (let i = 1; i < revisions.length; i++) {
          expect(revisions[i]).toBeGreaterThanOrEqual(revisions[i - 1] as number);
        }
        expect(new Set(revisions).size).toBe(5);
      });

      it("rejects a commit that touches one key twice", async () => {
        const p = fresh();
        await expect(
          store.commit(
            [],
            [
              { type: "put", key: `${p}k`, value: "1" },
              { type: "put", key: `${p}k`, value: "2" },
            ],
          ),
        ).rejects.toThrow();
        expect(await store.get(`${p}k`)).toBeUndefined();
      });

      it("rejects a put bound to a lease that does not exist", async () => {
        const p = fresh();
        const lease = await store.grantLease(5);
        await store.revokeLease(lease);
        await expect(
          store.commit([], [{ type: "put", key: `${p}k`, value: "1", lease }]),
        ).rejects.toThrow();
        expect(await store.get(`${p}k`)).toBeUndefined();
      });
    });

    describe("watch", () => {
      it("replays from a past revision, then streams live puts and deletes", async () => {
        const p = fresh();
        const r1 = await store.commit([], [{ type: "put", key: `${p}a`, value: "1" }]);
        const r2 = await store.commit([], [{ type: "put", key: `${p}b`, value: "2" }]);
        await store.commit([], [{ type: "put", key: `${p.slice(0, -1)}0`, value: "outside" }]);

        const probe = await probeWatch(store, p, r1.revision);
        try {
          await probe.waitFor((e) => e.length >= 2, "the two past puts");
          const r3 = await store.commit(
            [],
            [
              { type: "put", key: `${p}a`, value: "1b" },
              { type: "delete", key: `${p}b` },
            ],
          );
          await probe.waitFor((e) => e.length >= 4, "the live put and delete");

          expect(probe.events).toEqual([
            { type: "put", key: `${p}a`, value: "1", modRevision: r1.revision },
            { type: "put", key: `${p}b`, value: "2", modRevision: r2.revision },
            { type: "put", key: `${p}a`, value: "1b", modRevision: r3.revision },
            { type: "delete", key: `${p}b`, modRevision: r3.revision },
          ]);
          expect(probe.errors).toEqual([]);
        } finally {
          await probe.close();
        }
      });

      it("starts after the given revision when watching from range revision + 1", async () => {
        const p = fresh();
        await store.commit([], [{ type: "put", key: `${p}a`, value: "seen by range" }]);
        const read = await store.range(p);

        const probe = await probeWatch(store, p, read.revision + 1);
        try {
          const next = await store.commit([], [{ type: "put", key: `${p}b`, value: "new" }]);
          await probe.waitFor((e) => e.length >= 1, "the put after the range");
          expect(probe.events).toEqual([
            { type: "put", key: `${p}b`, value: "new", modRevision: next.revision },
          ]);
        } finally {
          await probe.close();
        }
      });

      it("stops delivering once closed", async () => {
        const p = fresh();
        const start = (await store.range(p)).revision + 1;
        const closedProbe = await probeWatch(store, p, start);
        const openProbe = await probeWatch(store, p, start);
        try {
          await closedProbe.close();
          await store.commit([], [{ type: "put", key: `${p}k`, value: "after close" }]);
          // The open watch seeing the write proves it was delivered; the closed one must not.
          await openProbe.waitFor((e) => e.length >= 1, "the put on the open watch");
          expect(closedProbe.events).toEqual([]);
        } finally {
          await openProbe.close();
        }
      });
    });

    describe("leases", () => {
      it("deletes a lease's keys when it expires", async () => {
        const p = fresh();
        const probe = await probeWatch(store, p, (await store.range(p)).revision + 1);
        try {
          const lease = await store.grantLease(1);
          const put = await store.commit([], [{ type: "put", key: `${p}k`, value: "v", lease }]);
          expect((await store.get(`${p}k`))?.lease).toBe(lease);

          const events = await probe.waitFor(
            (e) => e.some((ev) => ev.type === "delete"),
            "the lease to expire",
          );

          const deletion = events.find((ev) => ev.type === "delete");
          expect(deletion?.key).toBe(`${p}k`);
          expect(deletion?.modRevision).toBeGreaterThan(put.revision);
          expect(await store.get(`${p}k`)).toBeUndefined();
          expect(await store.refreshLease(lease)).toBe(false);
        } finally {
          await probe.close();
        }
      });

      it("keeps a refreshed lease alive past its TTL", async () => {
        const p = fresh();
        const probe = await probeWatch(store, p, (await store.range(p)).revision + 1);
        const kept = await store.grantLease(1);
        const control = await store.grantLease(1);
        let refreshes = 0;
        const refresher = setInterval(() => {
          store.refreshLease(kept).then((alive) => {
            if (alive) refreshes++;
          });
        }, 200);
        try {
          await store.commit(
            [],
            [
              { type: "put", key: `${p}kept`, value: "v", lease: kept },
              { type: "put", key: `${p}control`, value: "v", lease: control },
            ],
          );

          // The unrefreshed control lease expiring shows a full TTL has passed.
          await probe.waitFor(
            (e) => e.some((ev) => ev.type === "delete" && ev.key === `${p}control`),
            "the control lease to expire",
          );

          expect(refreshes).toBeGreaterThan(0);
          expect((await store.get(`${p}kept`))?.value).toBe("v");
          expect(probe.events.some((ev) => ev.key === `${p}kept` && ev.type === "delete")).toBe(
            false,
          );
        } finally {
          clearInterval(refresher);
          await store.revokeLease(kept);
          await probe.close();
        }
      });

      it("deletes a revoked lease's keys at once", async () => {
        const p = fresh();
        const lease = await store.grantLease(60);
        const put = await store.commit(
          [],
          [
            { type: "put", key: `${p}a`, value: "1", lease },
            { type: "put", key: `${p}b`, value: "2", lease },
          ],
        );
        const probe = await probeWatch(store, p, put.revision + 1);
        try {
          await store.revokeLease(lease);

          expect((await store.range(p)).items).toEqual([]);
          const events = await probe.waitFor((e) => e.length >= 2, "the two deletes");
          expect(events.map((ev) => [ev.type, ev.key]).sort()).toEqual([
            ["delete", `${p}a`],
            ["delete", `${p}b`],
          ]);
          expect(await store.refreshLease(lease)).toBe(false);
        } finally {
          await probe.close();
        }
      });
    });
  });
}
