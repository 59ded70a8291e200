import { afterEach, describe, expect, it } from "vitest";
import { ConfigModel } from "../snapshot/config-model.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store, WatchEvent, WatchHandlers } from "../store/store.js";
import { ConfigService } from "./config-service.js";

const PREFIX = "/clawgate/";
const agents = { nodes: [{ address: "127.0.0.1:9001" }] };
const apiRoute = { match: { pathPrefix: "/api" }, upstream: "agents" };
const quiet = { debug() {}, info() {}, warn() {} };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Two control planes' config services on one store, each with its own model. */
async function twoControlPlanes(wrap: (store: Store) => Store = (store) => store) {
  const store = await openEmbeddedStore({});
  const services = [store, wrap(store)].map((view) => {
    const model = new ConfigModel({ store: view, prefix: PREFIX, logger: quiet });
    cleanups.push(() => model.stop());
    return new ConfigService(view, PREFIX, { model });
  });
  cleanups.push(() => store.close());
  return { store, a: services[0] as ConfigService, b: services[1] as ConfigService };
}

/**
 * Holds the watch events the wrapped store delivers while held, as a slow link to etcd would,
 * and lets them through as soon as anyone reads a key: what a write that suspects its model is
 * behind does before judging again.
 */
function laggingWatches(inner: Store) {
  let held = false;
  const queued: Array<() => void> = [];
  const release = () => {
    held = false;
    for (const deliver of queued.splice(0)) deliver();
  };
  const store: Store = {
    ...inner,
    kind: inner.kind,
    async get(key, options) {
      release();
      return inner.get(key, options);
    },
    watch(prefix: string, fromRevision: number, handlers: WatchHandlers) {
      return inner.watch(prefix, fromRevision, {
        onEvents: (events: WatchEvent[]) => {
          if (held) queued.push(() => handlers.onEvents(events));
          else handlers.onEvents(events);
        },
        onError: (error) => handlers.onError?.(error),
      });
    },
  };
  return {
    store,
    hold() {
      held = true;
    },
  };
}

describe("ConfigService on the config model", () => {
  it("refuses a route to a missing upstream without writing anything", async () => {
    const { store, a } = await twoControlPlanes();
    await a.apply([{ kind: "tenants", name: "acme", document: {} }]);
    const before = await store.range("");

    const result = await a.apply([{ kind: "routes", name: "api", document: apiRoute }]);

    expect(result).toMatchObject({ ok: false, error: { code: "CLAWGATE_REFERENCE_CONFLICT" } });
    expect(await store.range("")).toEqual(before);
  });

  it("lets exactly one of two concurrent writers of the same revision win", async () => {
    const { store, a, b } = await twoControlPlanes();
    const created = await a.apply([{ kind: "upstreams", name: "agents", document: agents }]);
    if (!created.ok) throw new Error(created.error.message);
    await b.apply([{ kind: "tenants", name: "warm-up", document: {} }]);
    const revision = (await store.get(`${PREFIX}upstreams/agents`))?.modRevision;

    // Both control planes saw the upstream at the same revision and both write it, If-Match.
    const [first, second] = await Promise.all(
      [a, b].map((service, i) =>
        service.apply([
          {
            kind: "upstreams",
            name: "agents",
            document: { nodes: [{ address: `127.0.0.1:${9100 + i}` }] },
            ifMatch: revision,
          },
        ]),
      ),
    );

    const outcomes = [first, second].map((r) => (r?.ok ? "ok" : r?.error.code)).sort();
    expect(outcomes).toEqual(["CLAWGATE_PRECONDITION_FAILED", "ok"]);
    const winner = first?.ok ? 9100 : 9101;
    const stored = JSON.parse((await store.get(`${PREFIX}upstreams/agents`))?.value ?? "null");
    expect(stored.nodes[0].address).toBe(`127.0.0.1:${winner}`);
  });

  it("judges a write again once a lagging model caught up, rather than refusing it", async () => {
    const lag = { hold: () => {} };
    const { a, b } = await twoControlPlanes((store) => {
      const lagging = laggingWatches(store);
      lag.hold = lagging.hold;
      return lagging.store;
    });
    await b.apply([{ kind: "tenants", name: "warm-up", document: {} }]);

    // Control plane A creates the upstream; B's model has not heard of it yet.
    lag.hold();
    const created = await a.apply([{ kind: "upstreams", name: "agents", document: agents }]);
    expect(created.ok).toBe(true);
    const route = await b.apply([{ kind: "routes", name: "api", document: apiRoute }]);
    expect(route).toMatchObject({ ok: true, results: [{ action: "created" }] });

    // The same for an If-Match naming a revision only the store knows yet.
    lag.hold();
    const updated = await a.apply([
      { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9002" }] } },
    ]);
    if (!updated.ok) throw new Error(updated.error.message);
    const matched = await b.apply([
      { kind: "upstreams", name: "agents", document: agents, ifMatch: updated.revision },
    ]);
    expect(matched).toMatchObject({ ok: true, results: [{ action: "updated" }] });
  });
});
