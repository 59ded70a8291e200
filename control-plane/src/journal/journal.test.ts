import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { eventId } from "./event-key.js";
import { MAX_EVIDENCE_CHARS } from "./heal-event.js";
import { Journal, type JournalOptions } from "./journal.js";

const PREFIX = "/clawgate/";
const T0 = Date.parse("2025-03-01T12:00:00.000Z");

let store: Store;
let now: number;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  now = T0;
});
afterEach(async () => {
  await store.close();
});

function journal(options: Partial<JournalOptions> = {}): Journal {
  return new Journal({ store, prefix: PREFIX, clock: () => now, ...options });
}

async function eventKeys(): Promise<string[]> {
  return (await store.range(`${PREFIX}events/`)).items.map((item) => item.key);
}

describe("Journal", () => {
  it("writes each event under a time-ordered key with its JSON", async () => {
    const j = journal();
    const event = await j.record({
      upstream: "agents",
      node: "127.0.0.1:9001",
      action: "evict",
      evidence: "2 consecutive probe failures: connect ECONNREFUSED",
      source: "dp-1",
    });
    expect(event).toEqual({
      id: eventId(T0, 0),
      time: "2025-03-01T12:00:00.000Z",
      upstream: "agents",
      node: "127.0.0.1:9001",
      action: "evict",
      evidence: "2 consecutive probe failures: connect ECONNREFUSED",
      source: "dp-1",
    });
    expect(event.id).toBe(`00${T0}-000000`);
    const stored = await store.get(`${PREFIX}events/${event.id}`);
    expect(JSON.parse(stored?.value ?? "null")).toEqual({
      time: "2025-03-01T12:00:00.000Z",
      upstream: "agents",
      node: "127.0.0.1:9001",
      action: "evict",
      evidence: "2 consecutive probe failures: connect ECONNREFUSED",
      source: "dp-1",
    });
  });

  it("lists newest first, filtered by upstream and time, up to the limit", async () => {
    const j = journal();
    const actions = ["quarantine", "evict", "remediation_attempt", "remediation_result", "readmit"];
    for (const [i, action] of actions.entries()) {
      now = T0 + i * 1_000;
      await j.record({
        upstream: i % 2 === 0 ? "agents" : "tools",
        action: action as "evict",
        outcome: action === "remediation_result" ? "ok" : undefined,
        source: "cp-1",
      });
    }
    const all = await j.list();
    expect(all.map((e) => e.action)).toEqual([...actions].reverse());
    expect(all.find((e) => e.action === "remediation_result")?.outcome).toBe("ok");

    const agents = await j.list({ upstream: "agents" });
    expect(agents.map((e) => e.action)).toEqual(["readmit", "remediation_attempt", "quarantine"]);
    expect((await j.list({ limit: 2 })).map((e) => e.action)).toEqual([
      "readmit",
      "remediation_result",
    ]);
    const recent = await j.list({ since: T0 + 3_000 });
    expect(recent.map((e) => e.action)).toEqual(["readmit", "remediation_result"]);
    expect(await j.list({ upstream: "agents", since: T0 + 5_000 })).toEqual([]);
  });

  it("keeps at most maxEvents, deleting the oldest in the commit that adds one", async () => {
    const commits: number[] = [];
    const counting: Store = {
      ...store,
      kind: store.kind,
      commit: async (compares, operations) => {
        commits.push(operations.length);
        return store.commit(compares, operations);
      },
    };
    const j = new Journal({ store: counting, prefix: PREFIX, maxEvents: 5, clock: () => now });
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      now = T0 + i;
      ids.push((await j.record({ upstream: "agents", action: "evict", source: "dp" })).id);
    }
    expect(await eventKeys()).toEqual(ids.slice(-5).map((id) => `${PREFIX}events/${id}`));
    // One commit per event: the put plus, once full, the delete of the oldest.
    expect(commits).toEqual([1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2]);
    expect((await j.list()).map((e) => e.id)).toEqual(ids.slice(-5).reverse());
  });

  it("writes a burst in batches of at most 100 events and 128 operations, keeping maxEvents", async () => {
    const commits: Array<{ puts: number; operations: number }> = [];
    const counting: Store = {
      ...store,
      kind: store.kind,
      commit: async (compares, operations) => {
        commits.push({
          puts: operations.filter((op) => op.type === "put").length,
          operations: operations.length,
        });
        return store.commit(compares, operations);
      },
    };
    const j = new Journal({ store: counting, prefix: PREFIX, maxEvents: 50, clock: () => now });
    const events = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        j.record({
          upstream: "agents",
          node: `127.0.0.1:${9000 + i}`,
          action: "evict",
          source: "dp",
        }),
      ),
    );
    expect(new Set(events.map((event) => event.id)).size).toBe(300);
    // The newest 50 are kept, the last recorded newest.
    const kept = await j.list({ limit: 100 });
    expect(kept.map((event) => event.node)).toEqual(
      events
        .slice(-50)
        .reverse()
        .map((event) => event.node),
    );
    expect(await eventKeys()).toHaveLength(50);
    expect(commits.length).toBeLessThanOrEqual(10);
    for (const commit of commits) {
      expect(commit.puts).toBeLessThanOrEqual(100);
      expect(commit.operations).toBeLessThanOrEqual(128);
    }
  });

  it("fails a burst batch by batch when the store does, instead of retrying in a loop", async () => {
    let calls = 0;
    const failing: Store = {
      ...store,
      kind: store.kind,
      commit: async () => {
        calls++;
        throw new Error("config store failed: etcd is down");
      },
    };
    const j = new Journal({ store: failing, prefix: PREFIX, clock: () => now });
    const results = await Promise.allSettled(
      Array.from({ length: 250 }, () =>
        j.record({ upstream: "agents", action: "evict", source: "dp" }),
      ),
    );
    expect(results.every((result) => result.status === "rejected")).toBe(true);
    expect(String((results[0] as PromiseRejectedResult).reason)).toContain("etcd is down");
    expect(calls).toBe(3);
  });

  it("trims events another writer added once it re-reads the keys", async () => {
    const a = journal({ maxEvents: 4, resyncEvery: 3 });
    const b = journal({ maxEvents: 4, resyncEvery: 3 });
    for (let i = 0; i < 6; i++) {
      now = T0 + i;
      await (i % 2 === 0 ? a : b).record({ upstream: "agents", action: "evict", source: "x" });
    }
    // Each only knew its own 3 events plus what it read at first; neither has re-read yet.
    expect((await eventKeys()).length).toBeGreaterThan(4);
    now = T0 + 10;
    await a.record({ upstream: "agents", action: "readmit", source: "x" });
    const keys = await eventKeys();
    expect(keys).toHaveLength(4);
    expect((await a.list({ limit: 1 }))[0]?.action).toBe("readmit");
  });

  it("cuts a backlog larger than one commit down to the bound", async () => {
    const operations = Array.from({ length: 250 }, (_, i) => ({
      type: "put" as const,
      key: `${PREFIX}events/${eventId(T0 + i, 0)}`,
      value: JSON.stringify({
        time: new Date(T0 + i).toISOString(),
        upstream: "agents",
        action: "evict",
        source: "old",
      }),
    }));
    await store.commit([], operations);
    now = T0 + 1_000;
    const j = journal({ maxEvents: 10 });
    const event = await j.record({ upstream: "agents", action: "readmit", source: "new" });
    const keys = await eventKeys();
    expect(keys).toHaveLength(10);
    expect(keys.at(-1)).toBe(`${PREFIX}events/${event.id}`);
    expect(keys[0]).toBe(operations[241]?.key);
  });

  it("takes the next sequence number when another writer holds the key", async () => {
    const a = journal();
    const b = journal();
    const first = await a.record({ upstream: "agents", action: "evict", source: "a" });
    // Same clock, same sequence start: b's first key is taken.
    const second = await b.record({ upstream: "agents", action: "readmit", source: "b" });
    expect(second.id).not.toBe(first.id);
    expect((await a.list()).map((e) => e.source)).toEqual(["b", "a"]);
  });

  it("records nothing when the guard's compare fails, and everything when it holds", async () => {
    const j = journal();
    const claim = `${PREFIX}meta/claim`;
    await store.commit([], [{ type: "put", key: claim, value: "taken" }]);
    const refused = await j.recordGuarded(
      { upstream: "agents", action: "registry_expiry", source: "cp" },
      {
        compares: [{ key: claim, modRevision: 0 }],
        operations: [{ type: "put", key: claim, value: "mine" }],
      },
    );
    expect(refused).toBeUndefined();
    expect(await eventKeys()).toEqual([]);
    expect((await store.get(claim))?.value).toBe("taken");

    const current = (await store.get(claim))?.modRevision ?? 0;
    const recorded = await j.recordGuarded(
      { upstream: "agents", action: "registry_expiry", source: "cp" },
      {
        compares: [{ key: claim, modRevision: current }],
        operations: [{ type: "put", key: claim, value: "mine" }],
      },
    );
    expect(recorded?.action).toBe("registry_expiry");
    expect((await store.get(claim))?.value).toBe("mine");
    expect(await eventKeys()).toHaveLength(1);
  });

  it("refuses invalid events and cuts long evidence", async () => {
    const j = journal();
    await expect(
      j.record({ upstream: "Not_A_Name", action: "evict", source: "dp" }),
    ).rejects.toThrow(/invalid heal event: upstream/);
    await expect(
      j.record({ upstream: "agents", action: "explode" as "evict", source: "dp" }),
    ).rejects.toThrow(TypeError);
    expect(await eventKeys()).toEqual([]);
    const long = await j.record({
      upstream: "agents",
      action: "quarantine",
      evidence: "x".repeat(10_000),
      source: "dp",
    });
    expect(long.evidence).toHaveLength(MAX_EVIDENCE_CHARS);
  });

  it("counts clawgate_heal_actions_total by action and result and tells listeners", async () => {
    const metrics = new Registry();
    const j = journal({ metrics });
    const seen: string[] = [];
    const off = j.onRecord((event) => seen.push(event.action));
    await j.record({
      upstream: "agents",
      action: "remediation_result",
      outcome: "failed",
      source: "cp",
    });
    await j.record({
      upstream: "agents",
      action: "remediation_result",
      outcome: "failed",
      source: "cp",
    });
    await j.record({ upstream: "agents", action: "evict", source: "dp" });
    off();
    await j.record({ upstream: "agents", action: "readmit", source: "dp" });
    expect(seen).toEqual(["remediation_result", "remediation_result", "evict"]);
    const text = await metrics.metrics();
    expect(text).toContain(
      'clawgate_heal_actions_total{action="remediation_result",result="failed"} 2',
    );
    expect(text).toContain('clawgate_heal_actions_total{action="evict",result="none"} 1');
    // A second journal on the same registry shares the counter instead of failing to register.
    await journal({ metrics }).record({ upstream: "agents", action: "evict", source: "dp" });
    expect(await metrics.metrics()).toContain(
      'clawgate_heal_actions_total{action="evict",result="none"} 2',
    );
  });
});
