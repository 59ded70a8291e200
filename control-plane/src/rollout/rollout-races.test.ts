import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import { ConfigHistory } from "../history/config-history.js";
import {
  type AlsoWrites,
  type ApplyResult,
  ConfigService,
  type ResourceChange,
} from "../resources/config-service.js";
import { ConfigModel } from "../snapshot/config-model.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Operation, Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { syncedFleet } from "../testing/synced-fleet.js";
import { OutcomeBoard } from "./outcome-board.js";
import { RolloutController } from "./rollout-controller.js";

/** Both serve the published version: canaries are picked among SYNCED data planes only. */
const SYNCED_FLEET = syncedFleet("dp-a", "dp-b");

// Real etcd: the races are between commits of two control planes sharing one store, each with
// its own watch-fed model that may not have seen the other's write yet.
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

const QUIET = { debug() {}, info() {}, warn() {}, error() {} };
const SPEC = { canary: 1, bakeSeconds: 300, maxErrorRatio: 0.05, minRequests: 20 };

/** One control plane's write path: model, config service, history, rollouts, admin guard. */
interface Replica {
  config: ConfigService;
  history: ConfigHistory;
  rollouts: RolloutController;
  /** A plain write as POST /v1/apply makes it: the admin guard first, then the service. */
  write(changes: ResourceChange[]): Promise<ApplyResult>;
  /** An apply with `rollout`, as POST /v1/apply makes it. */
  rollOut(changes: ResourceChange[]): Promise<ApplyResult>;
  close(): Promise<void>;
}

let prefixes = 0;
/** Two replicas on one prefix; the base config is written and "published" at `published`. */
async function twoReplicas() {
  const prefix = `/rollout-races-${++prefixes}-${Date.now()}/`;
  const published = { version: 0 };
  const builder = {
    current: () => ({ version: published.version }) as PublishedSnapshot,
    onPublish: () => () => undefined,
  } as unknown as SnapshotPublisher;
  const replica = async (): Promise<Replica> => {
    const model = new ConfigModel({ store, prefix, logger: QUIET });
    await model.start();
    const config = new ConfigService(store, prefix, { model });
    const history = new ConfigHistory({ store, prefix });
    await history.start();
    const rollouts = new RolloutController({
      store,
      prefix,
      config,
      history,
      builder,
      fleet: { list: () => SYNCED_FLEET },
      // dp-a sorts first: the canary; dp-b is the rest.
      board: new OutcomeBoard({ nodes: () => ["dp-a", "dp-b"], get: () => undefined }),
      model,
      // The leader's own checks would end rollouts on their own; these tests end them by hand.
      election: { isLeader: () => false },
      logger: QUIET,
    });
    await rollouts.start();
    // Journaled in the history as the admin API does, so an abort can restore the base.
    const apply = (changes: ResourceChange[], also: Operation[]) =>
      config.apply(changes, {
        alsoWrite: (results, writes): AlsoWrites => {
          const changed = results.flatMap((r) =>
            r.action === "unchanged" ? [] : [{ kind: r.kind, name: r.name, action: r.action }],
          );
          const kept = history.operations("ci", changed, writes);
          return { commit: [...kept.commit, ...also], ahead: kept.ahead };
        },
      });
    return {
      config,
      history,
      rollouts,
      write: async (changes) => {
        const busy = rollouts.inProgressError();
        return busy === undefined ? apply(changes, []) : { ok: false, error: busy };
      },
      rollOut: (changes) => rollouts.apply(SPEC, "ci", (also) => apply(changes, also)),
      close: async () => {
        rollouts.stop();
        await config.close();
        await model.stop();
      },
    };
  };
  const a = await replica();
  const b = await replica();
  const base = await a.write([upstream("base", 9000)]);
  if (!base.ok) throw new Error(base.error.message);
  published.version = base.revision;
  const rolloutState = async () => {
    const kv = await store.get(`${prefix}rollout/current`);
    return kv === undefined ? undefined : (JSON.parse(kv.value) as { state: string }).state;
  };
  return { a, b, prefix, rolloutState, close: () => Promise.all([a.close(), b.close()]) };
}

function upstream(name: string, port: number): ResourceChange {
  return { kind: "upstreams", name, document: { nodes: [{ address: `127.0.0.1:${port}` }] } };
}

function ok<T extends { ok: boolean }>(result: T): Extract<T, { ok: true }> {
  if (!result.ok) throw new Error((result as { error?: { message: string } }).error?.message);
  return result as Extract<T, { ok: true }>;
}

describe("config writes and rollouts on two control planes sharing etcd", () => {
  it("refuses a write that races a rollout's start, naming the rollout, however the race ends", async () => {
    const { a, close } = await twoReplicas();
    // Both pass the in-memory guard: nothing bakes yet when they start. The plain write loses
    // the commit to the rollout and tries again, with the rollout now baking.
    const [rollout, plain] = await Promise.all([
      a.rollOut([upstream("canary", 9001)]),
      a.write([upstream("other", 9002)]),
    ]);
    const started = ok(rollout);
    if (plain.ok) {
      // It may only have landed before the rollout, never on top of it while it bakes.
      expect(plain.revision).toBeLessThan(started.revision);
    } else {
      expect(plain.error.code).toBe("CLAWGATE_ROLLOUT_IN_PROGRESS");
      expect(plain.error.message).toContain(`rollout of version ${started.revision}`);
    }
    // Every version written after the rollout's would be undone by its rollback.
    const versions = (await a.history.list()).map((entry) => entry.version);
    expect(Math.max(...versions)).toBe(started.revision);
    await close();
  });

  it("refuses a write on a replica whose own view has not seen the rollout yet", async () => {
    const { a, b, close } = await twoReplicas();
    // B's plain write is judged before A's rollout commits (B's guard passes), and commits after.
    const judged = b.rollouts.inProgressError();
    expect(judged).toBeUndefined();
    const started = ok(await a.rollOut([upstream("canary", 9001)]));
    const plain = await b.config.apply([upstream("other", 9002)]);
    expect(plain.ok).toBe(false);
    if (plain.ok) return;
    expect(plain.error.code).toBe("CLAWGATE_ROLLOUT_IN_PROGRESS");
    expect(plain.error.message).toContain(`rollout of version ${started.revision}`);
    expect((await a.config.get("upstreams", "other")).ok).toBe(false);
    await close();
  });

  it("lets only one of two concurrent rollout applies commit", async () => {
    const { a, b, close } = await twoReplicas();
    const results = await Promise.all([
      a.rollOut([upstream("first", 9001)]),
      b.rollOut([upstream("second", 9002)]),
    ]);
    const won = results.filter((result) => result.ok);
    const lost = results.flatMap((result) => (result.ok ? [] : [result.error]));
    expect(won).toHaveLength(1);
    expect(lost.map((error) => error.code)).toEqual(["CLAWGATE_ROLLOUT_IN_PROGRESS"]);
    const version = ok(won[0] as ApplyResult).revision;
    expect(lost[0]?.message).toContain(`rollout of version ${version}`);
    // Both replicas follow the rollout that committed, with its own version.
    for (const replica of [a, b]) {
      await expect.poll(() => replica.rollouts.baking()?.version).toBe(version);
    }
    await close();
  });

  it("keeps the rest pinned when a second rollout apply on the same replica fails", async () => {
    const { a, close } = await twoReplicas();
    const results = await Promise.all([
      a.rollOut([upstream("first", 9001)]),
      a.rollOut([upstream("second", 9002)]),
    ]);
    expect(results.filter((result) => result.ok)).toHaveLength(1);
    expect(a.rollouts.baking()).toBeDefined();
    // dp-b is outside the canaries: held on the base version while the winner bakes.
    expect(a.rollouts.pinned("dp-b")).toBeDefined();
    expect(a.rollouts.pinned("dp-a")).toBeUndefined();
    await close();
  });

  it("lets only one of a promote on one replica and an abort on another succeed", async () => {
    const { a, b, rolloutState, close } = await twoReplicas();
    const started = ok(await a.rollOut([upstream("base", 9001)]));
    await expect.poll(() => b.rollouts.baking()?.version).toBe(started.revision);
    const [promoted, aborted] = await Promise.all([
      a.rollouts.promote("op-a"),
      b.rollouts.abort("op-b"),
    ]);
    expect([promoted.ok, aborted.ok].filter(Boolean)).toHaveLength(1);
    const loser = promoted.ok ? aborted : promoted;
    if (loser.ok) return;
    expect(loser.error.code).toBe("CLAWGATE_STORE_CONFLICT");
    expect(loser.error.message).toContain(`rollout of version ${started.revision}`);
    // The stored state and the config agree: promoted keeps the new version, rolled back the base.
    const state = await rolloutState();
    const base = ok(await a.config.get("upstreams", "base"));
    const address = base.resource.document.nodes[0]?.address;
    if (promoted.ok) {
      expect(state).toBe("promoted");
      expect(address).toBe("127.0.0.1:9001");
    } else {
      expect(state).toBe("rolled-back");
      expect(address).toBe("127.0.0.1:9000");
    }
    await close();
  });

  it("rolls back a big restore whose rollout was promoted while its batches were written", async () => {
    const { a, rolloutState, prefix, close } = await twoReplicas();
    const started = ok(await a.rollOut([upstream("base", 9001)]));
    const key = `${prefix}rollout/current`;
    const decidedAt = (await store.get(key))?.modRevision ?? 0;
    // The same etcd seen with 4000-byte transactions, so 40 upstreams are a staged apply.
    const small = Object.assign(Object.create(store) as Store, {
      txnLimits: { maxOps: 128, maxBytes: 4000 },
    });
    const promoteMidway = async (index: number) => {
      if (index !== 1) return;
      ok(await a.rollouts.promote("op-a"));
    };
    const restorer = new ConfigService(small, prefix, {
      stagedHooks: { beforeBatch: promoteMidway },
    });
    const many = Array.from({ length: 40 }, (_, i) => upstream(`bulk-${i}`, 9100 + i));
    const restored = await restorer.apply(many, { endsRollout: decidedAt });
    expect(restored.ok).toBe(false);
    if (!restored.ok) {
      expect(restored.error.code).toBe("CLAWGATE_STORE_CONFLICT");
      expect(restored.error.message).toContain(
        `rollout of version ${started.revision} was promoted`,
      );
    }
    expect(await rolloutState()).toBe("promoted");
    expect(ok(await a.config.list("upstreams")).items.map((u) => u.name)).toEqual(["base"]);
    await restorer.close();
    await close();
  });
});
