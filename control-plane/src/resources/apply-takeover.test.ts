import { RESOURCE_KINDS } from "@clawgate/proto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { applyGateKey, applyUndoPrefix } from "./apply-gate.js";
import { ConfigService, type ResourceChange } from "./config-service.js";

// A control plane killed half-way through a big apply and restarted at the same place takes
// its own abandoned apply over at its first write, instead of refusing writes (409) until the
// dead process's owner lease runs out. Anyone else still waits for the lease.
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

const SLOT = "cp-host/127.0.0.1:9180";

function upstreams(count: number, nodes: number): ResourceChange[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: "upstreams" as const,
    name: `u-${i}`,
    document: {
      nodes: Array.from({ length: nodes }, (_, n) => ({ address: `10.0.${i % 250}.${n + 1}:80` })),
    },
  }));
}

async function configDump(prefix: string): Promise<Record<string, string>> {
  const read = await store.range(RESOURCE_KINDS.map((kind) => `${prefix}${kind}/`));
  return Object.fromEntries(read.items.map((item) => [item.key, item.value]));
}

it("lets a restarted control plane take over the apply it left half-way, at once", async () => {
  const prefix = "/takeover/";
  const seed = new ConfigService(store, prefix);
  expect((await seed.apply(upstreams(10, 5))).ok).toBe(true);
  const before = await configDump(prefix);

  // The first process, with its own etcd connection; it stops for good at its fourth batch, its
  // connection left open, so its timer keeps its owner lease alive as a slow owner's would.
  const dyingStore = await openEtcdStore({ endpoints: [etcd.endpoint] });
  let reached!: () => void;
  const atBatch = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let thaw!: () => void;
  const dying = new ConfigService(dyingStore, prefix, {
    applyOwnerSlot: SLOT,
    stagedHooks: {
      async beforeBatch(index) {
        if (index !== 3) return;
        reached();
        await new Promise<void>((resolve) => {
          thaw = resolve;
        });
      },
    },
  });
  const applying = dying.apply(upstreams(3_000, 3));
  await atBatch;

  // Another control plane cannot tell a dead owner from a slow one: it is told to wait.
  const elsewhere = new ConfigService(store, prefix, {
    applyOwnerSlot: "other-host/127.0.0.1:9180",
  });
  const refused = await elsewhere.apply([{ kind: "breakers", name: "b", document: {} }]);
  expect(refused).toMatchObject({ ok: false, error: { code: "CLAWGATE_STORE_CONFLICT" } });

  // The same place, a new boot: the restarted process. Its write goes through now.
  const restarted = new ConfigService(store, prefix, { applyOwnerSlot: SLOT });
  const written = await restarted.apply([{ kind: "breakers", name: "b", document: {} }]);
  expect(written.ok).toBe(true);
  const after = await configDump(prefix);
  expect(Object.keys(after).sort()).toEqual([...Object.keys(before), `${prefix}breakers/b`].sort());
  for (const [key, value] of Object.entries(before)) expect(after[key]).toBe(value);
  const coordination = await store.range([
    applyGateKey(prefix),
    applyUndoPrefix(prefix),
    `${prefix}meta/apply-owner/`,
  ]);
  expect(coordination.items).toEqual([]);

  // The old apply, were it to wake up, can write nothing more: it fails, the config stays.
  thaw();
  expect((await applying).ok).toBe(false);
  expect(await configDump(prefix)).toEqual(after);
  await dying.close();
  await dyingStore.close();
  await Promise.all([seed.close(), elsewhere.close(), restarted.close()]);
}, 120_000);
