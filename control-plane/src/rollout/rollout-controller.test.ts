import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SnapshotPublisher } from "../grpc/snapshot-publisher.js";
import { ConfigHistory, historyPrefix } from "../history/config-history.js";
import { ConfigService, type ResourceChange } from "../resources/config-service.js";
import type { PublishedSnapshot } from "../snapshot/published-snapshot.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { syncedFleet } from "../testing/synced-fleet.js";
import { OutcomeBoard } from "./outcome-board.js";
import { RolloutController } from "./rollout-controller.js";
import { rolloutSpecSchema } from "./rollout-state.js";

/** Both serve the published version: canaries are picked among SYNCED data planes only. */
const SYNCED_FLEET = syncedFleet("dp-a", "dp-b");

// Real etcd: a rollback reads the config and the history from the store and writes through it.
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

/** Publishes the versions a test names, as the snapshot builder would. */
class Publisher implements SnapshotPublisher {
  #current: PublishedSnapshot | undefined;
  readonly #listeners = new Set<(published: PublishedSnapshot) => void>();
  current() {
    return this.#current;
  }
  onPublish(listener: (published: PublishedSnapshot) => void) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  publish(version: number): PublishedSnapshot {
    const published = { version, nonce: `v${version}` } as PublishedSnapshot;
    this.#current = published;
    for (const listener of this.#listeners) listener(published);
    return published;
  }
}

const quiet = { info() {}, warn() {}, error() {} };
const spec = rolloutSpecSchema.parse({ canary: 1, bakeSeconds: 3600 });
let prefixes = 0;

/** A control plane's rollout parts on a fresh prefix, with data planes dp-a (the canary) and dp-b. */
async function setUp(historyLimit?: number) {
  const prefix = `/rollout-${++prefixes}-${Date.now()}/`;
  const config = new ConfigService(store, prefix);
  const history = new ConfigHistory({ store, prefix, limit: historyLimit });
  await history.start();
  const builder = new Publisher();
  const controller = new RolloutController({
    store,
    prefix,
    config,
    history,
    builder,
    fleet: { list: () => SYNCED_FLEET },
    board: new OutcomeBoard({ get: () => undefined, nodes: () => ["dp-a", "dp-b"] }),
    election: { isLeader: () => false },
    logger: quiet,
    publishWaitMs: 0,
  });
  await controller.start();
  const rollOut = (changes: ResourceChange[]) =>
    controller.apply(spec, "ci", (also) =>
      config.apply(changes, {
        alsoWrite: (results, writes) => {
          const kept = history.operations(
            "ci",
            results.flatMap((r) =>
              r.action === "unchanged" ? [] : [{ kind: r.kind, name: r.name, action: r.action }],
            ),
            writes,
          );
          return { ...kept, commit: [...kept.commit, ...also] };
        },
      }),
    );
  /** A config write straight into etcd, as before the control plane kept any history. */
  const writeAround = async (name: string, port: number) =>
    (
      await store.commit(
        [],
        [
          {
            type: "put",
            key: `${prefix}upstreams/${name}`,
            value: JSON.stringify({ nodes: [{ address: `127.0.0.1:${port}` }] }),
          },
        ],
      )
    ).revision;
  const close = async () => {
    controller.stop();
    await config.close();
  };
  return { prefix, config, history, builder, controller, rollOut, writeAround, close };
}

const address = async (prefix: string, name: string) => {
  const kv = await store.get(`${prefix}upstreams/${name}`);
  return kv === undefined
    ? undefined
    : (JSON.parse(kv.value) as { nodes: { address: string }[] }).nodes[0]?.address;
};

describe("RolloutController on etcd", () => {
  it("rolls back a rollout whose base has no history entry, with historyLimit 1", async () => {
    const { prefix, builder, controller, rollOut, writeAround, close } = await setUp(1);
    builder.publish(await writeAround("agents", 9001));
    const started = await rollOut([
      { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9002" }] } },
    ]);
    expect(started.ok && started.dryRun === false).toBe(true);
    expect(await address(prefix, "agents")).toBe("127.0.0.1:9002");

    const aborted = await controller.abort("alice");
    if (!aborted.ok) throw new Error(aborted.error.message);
    expect(aborted.rollout.state).toBe("rolled-back");
    expect(await address(prefix, "agents")).toBe("127.0.0.1:9001");
    await close();
  });

  it("keeps the rest on the base until the restored config is published, however late", async () => {
    const { builder, controller, rollOut, config, history, close } = await setUp();
    // A base with its own history entry, so only the release after the rollback is at stake.
    const written = await config.apply(
      [{ kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9101" }] } }],
      {
        alsoWrite: (_results, writes) =>
          history.operations(
            "ci",
            [{ kind: "upstreams", name: "agents", action: "created" }],
            writes,
          ),
      },
    );
    if (!written.ok) throw new Error(written.error.message);
    const base = builder.publish(written.revision);
    const started = await rollOut([
      { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9102" }] } },
    ]);
    if (!started.ok) throw new Error(started.error.message);
    builder.publish(started.revision);
    expect(controller.pinned("dp-a")).toBeUndefined();
    expect(controller.pinned("dp-b")).toBe(base);

    // The abort answers (publishWaitMs 0) before the restored config is published here.
    const aborted = await controller.abort("alice");
    if (!aborted.ok) throw new Error(aborted.error.message);
    expect(controller.pinned("dp-b")).toBe(base);
    builder.publish(aborted.rollout.rollbackVersion ?? Number.NaN);
    expect(controller.pinned("dp-b")).toBeUndefined();
    await close();
  });

  it("refuses a rollout up front, saying why, when a newer entry than its base cannot be undone", async () => {
    const { prefix, builder, controller, rollOut, writeAround, close } = await setUp();
    builder.publish(await writeAround("agents", 9201));
    // A version newer than the published one, from a control plane that kept no undo steps.
    const old = await store.commit(
      [],
      [
        {
          type: "put",
          key: `${historyPrefix(prefix)}000000000000001-000001`,
          value: JSON.stringify({
            time: new Date().toISOString(),
            author: "ci",
            changes: [],
            undo: null,
          }),
        },
      ],
    );
    const refused = await rollOut([
      { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9202" }] } },
    ]);
    expect(refused.ok ? undefined : refused.error.code).toBe("CLAWGATE_ROLLOUT_REFUSED");
    expect(refused.ok ? undefined : refused.error.message).toContain(
      `could not be rolled back: version ${old.revision} has no undo steps`,
    );
    expect(await address(prefix, "agents")).toBe("127.0.0.1:9201");
    expect(controller.baking()).toBeUndefined();
    await close();
  });

  it("names the rollout when its abort cannot roll it back", async () => {
    const { prefix, builder, controller, rollOut, writeAround, close } = await setUp();
    builder.publish(await writeAround("agents", 9301));
    const started = await rollOut([
      { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9302" }] } },
    ]);
    if (!started.ok) throw new Error(started.error.message);
    // Its entry deleted straight from etcd: nothing is left to undo.
    for (const kv of (await store.range(historyPrefix(prefix))).items) {
      await store.commit([], [{ type: "delete", key: kv.key }]);
    }
    const aborted = await controller.abort("alice");
    expect(aborted.ok ? undefined : aborted.error.message).toContain(
      `the rollout of version ${started.revision} could not be rolled back`,
    );
    await close();
  });
});
