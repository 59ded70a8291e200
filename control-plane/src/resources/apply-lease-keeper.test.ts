import { afterAll, beforeAll, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { ConfigService, type ResourceChange } from "./config-service.js";

// A big apply's owner lease is short and renewed from a timer, so an owner that is slow but
// alive (here: stopped in a hook, its event loop free) keeps its gate long past the lease's TTL,
// and its apply still lands whole. Only a dead owner's gate is reclaimed (big-apply.test.ts).
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

function upstreams(count: number): ResourceChange[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: "upstreams" as const,
    name: `u-${i}`,
    document: { nodes: [{ address: `10.0.${i % 250}.${(i >> 8) + 1}:80` }] },
  }));
}

it("keeps a slow but live owner's apply gated past its lease TTL, and lands it whole", async () => {
  const prefix = "/slow-owner/";
  // Counts the renewals that etcd accepted while the apply stands still: 9 of them, a third of
  // the 1 s TTL apart, span three TTLs, over which a lease renewed only by progress expires.
  let renewals = 0;
  let enoughRenewals!: () => void;
  const renewedPastTtl = new Promise<void>((resolve) => {
    enoughRenewals = resolve;
  });
  let standingStill = false;
  const counting: Store = Object.create(store, {
    refreshLease: {
      value: async (lease: string) => {
        const alive = await store.refreshLease(lease);
        if (alive && standingStill && ++renewals === 9) enoughRenewals();
        return alive;
      },
    },
  });
  let reachedBatch!: () => void;
  const atBatch = new Promise<void>((resolve) => {
    reachedBatch = resolve;
  });
  let resume!: () => void;
  const slow = new ConfigService(counting, prefix, {
    applyLeaseTtlSeconds: 1,
    stagedHooks: {
      async beforeBatch(index) {
        if (index !== 3) return;
        standingStill = true;
        reachedBatch();
        await new Promise<void>((resolve) => {
          resume = resolve;
        });
      },
    },
  });
  const other = new ConfigService(store, prefix);
  // Were the owner key dropped with its lease, the test ends there rather than at its timeout.
  let ownerDropped!: () => void;
  const ownerGone = new Promise<void>((resolve) => {
    ownerDropped = resolve;
  });
  const owners = await store.watch(`${prefix}meta/apply-owner/`, 0, {
    onEvents(events) {
      if (events.some((event) => event.type === "delete")) ownerDropped();
    },
  });
  const applying = slow.apply(upstreams(2_000));
  await atBatch;
  const first = await Promise.race([
    renewedPastTtl.then(() => "renewed past its TTL"),
    ownerGone.then(() => "owner lease expired"),
  ]);
  await owners.close();
  expect(first).toBe("renewed past its TTL");

  // Its gate still stands: other control planes neither roll it back nor write around it.
  expect(await other.recoverAbandonedApply()).toBe("running");
  const refused = await other.apply([{ kind: "breakers", name: "b", document: {} }]);
  expect(refused).toMatchObject({ ok: false, error: { code: "CLAWGATE_STORE_CONFLICT" } });

  resume();
  const result = await applying;
  expect(result.ok).toBe(true);
  const listed = await other.list("upstreams");
  expect(listed.ok && listed.items.length).toBe(2_000);
  expect((await other.apply([{ kind: "breakers", name: "b", document: {} }])).ok).toBe(true);
  await Promise.all([slow.close(), other.close()]);
}, 120_000);
