import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "./embedded-store.js";
import { describeStoreContract, probeWatch } from "./store-contract.js";

async function freshMemoryStore() {
  const store = await openEmbeddedStore({});
  return { store, dispose: () => store.close() };
}

describeStoreContract("embedded (memory)", () => openEmbeddedStore({}), freshMemoryStore);

// The same contract with persistence on, so the file write path sits under every commit.
const contractDirs: string[] = [];
afterAll(async () => {
  await Promise.all(contractDirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function openFileStore() {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-embedded-"));
  contractDirs.push(dir);
  return openEmbeddedStore({ path: join(dir, "store.json") });
}
describeStoreContract("embedded (file)", openFileStore, async () => {
  const store = await openFileStore();
  return { store, dispose: () => store.close() };
});

describe("embedded store", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "clawgate-embedded-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps keys and continues the revision after a reopen, dropping lease-bound keys", async () => {
    const path = join(dir, "nested", "store.json");
    const first = await openEmbeddedStore({ path });
    const lease = await first.grantLease(60);
    await first.commit([], [{ type: "put", key: "/a", value: "1" }]);
    const last = await first.commit(
      [],
      [
        { type: "put", key: "/b", value: "2" },
        { type: "put", key: "/leased", value: "gone after restart", lease },
      ],
    );
    const before = await first.range("/");
    await first.close();

    const second = await openEmbeddedStore({ path });
    try {
      const after = await second.range("/");
      expect(after.revision).toBe(last.revision);
      expect(after.items).toEqual(before.items.filter((kv) => kv.key !== "/leased"));

      const next = await second.commit(
        [{ key: "/a", modRevision: before.items[0]?.modRevision ?? -1 }],
        [{ type: "put", key: "/a", value: "1b" }],
      );
      expect(next).toEqual({ succeeded: true, revision: last.revision + 1 });
    } finally {
      await second.close();
    }
    const onDisk = JSON.parse(await readFile(path, "utf8"));
    expect(onDisk.revision).toBe(last.revision + 1);
  });

  it("leaves the file untouched by a failed commit", async () => {
    const path = join(dir, "store.json");
    const store = await openEmbeddedStore({ path });
    try {
      await store.commit([], [{ type: "put", key: "/a", value: "1" }]);
      const saved = await readFile(path, "utf8");
      const result = await store.commit(
        [{ key: "/a", modRevision: 0 }],
        [{ type: "put", key: "/a", value: "2" }],
      );
      expect(result.succeeded).toBe(false);
      expect(await readFile(path, "utf8")).toBe(saved);
    } finally {
      await store.close();
    }
  });

  it("fails a watch whose start revision is older than the kept history", async () => {
    const store = await openEmbeddedStore({ historyLimit: 2 });
    try {
      const r1 = await store.commit([], [{ type: "put", key: "/k", value: "1" }]);
      await store.commit([], [{ type: "put", key: "/k", value: "2" }]);
      const r3 = await store.commit([], [{ type: "put", key: "/k", value: "3" }]);

      const compacted = await probeWatch(store, "/", r1.revision);
      const error = await compacted.nextError();
      expect(error.message).toMatch(/compacted/);
      expect((error as Error & { code?: string }).code).toBe("CLAWGATE_STORE_COMPACTED");
      expect(compacted.events).toEqual([]);

      const kept = await probeWatch(store, "/", r3.revision - 1);
      await kept.waitFor((e) => e.length >= 2, "the two kept revisions");
      expect(kept.events.map((e) => e.value)).toEqual(["2", "3"]);
      await kept.close();
    } finally {
      await store.close();
    }
  });

  it("fails a watch from before the revision it was reopened at", async () => {
    const path = join(dir, "store.json");
    const first = await openEmbeddedStore({ path });
    const put = await first.commit([], [{ type: "put", key: "/k", value: "1" }]);
    await first.close();

    const second = await openEmbeddedStore({ path });
    try {
      const probe = await probeWatch(second, "/", put.revision);
      expect((await probe.nextError()).message).toMatch(/compacted/);
    } finally {
      await second.close();
    }
  });

  it("never calls watch handlers inside commit", async () => {
    const store = await openEmbeddedStore({});
    try {
      let inCommit = false;
      let calledDuringCommit = false;
      let delivered!: () => void;
      const got = new Promise<void>((resolve) => {
        delivered = resolve;
      });
      const watch = await store.watch("/", 1, {
        onEvents() {
          if (inCommit) calledDuringCommit = true;
          delivered();
        },
      });
      inCommit = true;
      const pending = store.commit([], [{ type: "put", key: "/k", value: "1" }]);
      inCommit = false;
      await pending;
      await got;
      expect(calledDuringCommit).toBe(false);
      await watch.close();
    } finally {
      await store.close();
    }
  });
});
