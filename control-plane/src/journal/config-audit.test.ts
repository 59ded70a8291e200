import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigService, type ResourceChange } from "../resources/config-service.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { auditChangesPrefix, ConfigAudit } from "./config-audit.js";

// Real etcd: its 128-operation transactions are what make an apply of 300 resources staged.
let etcd: EtcdProcess;
let store: Store;
beforeAll(async () => {
  etcd = await startEtcd();
  store = await openEtcdStore({ endpoints: [etcd.endpoint] });
});
afterAll(async () => {
  await store?.close();
  await etcd?.stop();
});

let prefixes = 0;
function upstreams(count: number, port: number): ResourceChange[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: "upstreams" as const,
    name: `u-${i}`,
    document: { nodes: [{ address: `127.0.0.1:${port}` }] },
  }));
}

async function setUp(options: ConstructorParameters<typeof ConfigService>[2] = {}) {
  const prefix = `/audit-${++prefixes}-${Date.now()}/`;
  const audit = new ConfigAudit({ store, prefix, maxEvents: 3 });
  await audit.start();
  const config = new ConfigService(store, prefix, options);
  const apply = (changes: ResourceChange[]) =>
    config.apply(changes, {
      alsoWrite: (results) =>
        audit.operations(
          "ci",
          results.flatMap((r) =>
            r.action === "unchanged" ? [] : [{ kind: r.kind, name: r.name, action: r.action }],
          ),
        ),
    });
  return { audit, apply };
}

describe("ConfigAudit with the config service", () => {
  it("journals a staged apply in its closing commit, at the revision the apply answers", async () => {
    const { audit, apply } = await setUp();
    const result = await apply(upstreams(300, 9001));
    expect(result.ok).toBe(true);
    const [event] = await audit.list();
    expect(event?.revision).toBe(result.ok ? result.revision : -1);
    expect(event?.changes).toHaveLength(300);
  }, 60_000);

  it("journals nothing for a staged apply that is rolled back", async () => {
    const { audit, apply } = await setUp({
      stagedHooks: {
        beforeBatch(index) {
          if (index === 1) throw new Error("injected failure");
        },
      },
    });
    const result = await apply(upstreams(300, 9002));
    expect(result.ok).toBe(false);
    expect(await audit.list()).toEqual([]);
  }, 60_000);

  it("keeps the newest maxEvents, trimming in the writes' own commits", async () => {
    const { audit, apply } = await setUp();
    const revisions: number[] = [];
    for (let port = 1; port <= 5; port++) {
      const result = await apply(upstreams(1, port));
      if (result.ok) revisions.push(result.revision);
    }
    const events = await audit.list();
    expect(events.map((event) => event.revision)).toEqual(revisions.slice(-3).reverse());
  });
});

describe("ConfigAudit when a commit does not happen", () => {
  it("still trims the keys a lost attempt meant to, so no event outlives maxEvents", async () => {
    const prefix = `/audit-${++prefixes}-${Date.now()}/`;
    const audit = new ConfigAudit({ store, prefix, maxEvents: 3 });
    await audit.start();
    // The store, but the commit after `loseNext` is set answers as a lost race, writing nothing.
    let loseNext = false;
    const racing = Object.assign(Object.create(store) as Store, {
      commit: async (...args: Parameters<Store["commit"]>) => {
        if (!loseNext) return store.commit(...args);
        loseNext = false;
        return { succeeded: false, revision: (await store.range("/nothing/")).revision };
      },
    });
    const config = new ConfigService(racing, prefix);
    const revisions: number[] = [];
    const apply = async (port: number) => {
      const result = await config.apply(upstreams(1, port), {
        alsoWrite: (results) =>
          audit.changeWrites(
            "ci",
            results.flatMap((r) =>
              r.action === "unchanged" ? [] : [{ kind: r.kind, name: r.name, action: r.action }],
            ),
          ),
      });
      expect(result.ok).toBe(true);
      if (result.ok) revisions.push(result.revision);
    };
    for (let port = 1; port <= 3; port++) await apply(port);
    // Lost once, retried with fresh writes: the retry commits, the lost attempt never did.
    loseNext = true;
    await apply(4);
    await apply(5);
    await apply(6);
    const events = await audit.list({ limit: 100 });
    expect(events.map((event) => event.revision)).toEqual(revisions.slice(-3).reverse());
    await config.close();
  });
});

describe("ConfigAudit's long change lists", () => {
  it("keeps them in chunks, lists them whole and deletes the chunks with their event", async () => {
    const prefix = `/audit-${++prefixes}-${Date.now()}/`;
    // The test etcd seen with 4000-byte commits: a list over 500 bytes goes in chunks.
    const small = Object.assign(Object.create(store) as Store, {
      txnLimits: { maxOps: 128, maxBytes: 4000 },
    });
    const audit = new ConfigAudit({ store: small, prefix, maxEvents: 1 });
    await audit.start();
    const config = new ConfigService(store, prefix);
    const apply = (changes: ResourceChange[]) =>
      config.apply(changes, {
        alsoWrite: (results) =>
          audit.changeWrites(
            "ci",
            results.flatMap((r) =>
              r.action === "unchanged" ? [] : [{ kind: r.kind, name: r.name, action: r.action }],
            ),
          ),
      });

    expect((await apply(upstreams(100, 9001))).ok).toBe(true);
    expect((await store.range(auditChangesPrefix(prefix))).items.length).toBeGreaterThan(1);
    const [event] = await audit.list();
    expect(event?.changes).toHaveLength(100);

    expect((await apply(upstreams(1, 9002))).ok).toBe(true);
    expect((await store.range(auditChangesPrefix(prefix))).items).toHaveLength(0);
    await config.close();
  });
});
