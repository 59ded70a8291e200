import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { ConfigModel, type ModelChange } from "./config-model.js";

const PREFIX = "/clawgate/";
const quiet = { debug() {}, info() {}, warn() {} };

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function modelOn(store: Store) {
  const model = new ConfigModel({ store, prefix: PREFIX, logger: quiet });
  const changes: ModelChange[] = [];
  model.onChange((change) => changes.push(change));
  cleanups.push(() => model.stop());
  await model.start();
  return { model, changes };
}

async function write(store: Store, model: ConfigModel, path: string, value: string | undefined) {
  const key = `${PREFIX}${path}`;
  const { revision } = await store.commit(
    [],
    [value === undefined ? { type: "delete", key } : { type: "put", key, value }],
  );
  expect(await model.waitForRevision(revision, 10_000)).toBe(true);
}

describe("ConfigModel", () => {
  it("keeps parsed documents and who references whom as routes move between upstreams", async () => {
    const store = await openEmbeddedStore({});
    cleanups.push(() => store.close());
    const { model, changes } = await modelOn(store);

    await write(store, model, "upstreams/a", JSON.stringify({ breaker: "strict" }));
    await write(store, model, "routes/r", JSON.stringify({ match: { path: "/r" }, upstream: "a" }));
    expect(model.get("upstreams", "a")?.document.healthCheck.intervalMs).toBe(10_000);
    expect([...model.routesUsing("a")]).toEqual(["r"]);
    expect([...model.upstreamsUsing("strict")]).toEqual(["a"]);

    await write(
      store,
      model,
      "routes/r",
      JSON.stringify({ match: { path: "/r" }, split: [{ upstream: "b", weight: 1 }] }),
    );
    expect([...model.routesUsing("a")]).toEqual([]);
    // A reference to a missing upstream is kept too: creating it must re-check the route.
    expect([...model.routesUsing("b")]).toEqual(["r"]);
    expect(changes.at(-1)?.resources).toEqual(new Set(["routes/r"]));

    await write(store, model, "routes/r", undefined);
    expect(model.get("routes", "r")).toBeUndefined();
    expect([...model.routesUsing("b")]).toEqual([]);
  });

  it("records a document it cannot parse and forgets it once the key is fixed", async () => {
    const store = await openEmbeddedStore({});
    cleanups.push(() => store.close());
    const { model } = await modelOn(store);

    await write(store, model, "breakers/b", "{not json");
    expect(model.invalidReason("breakers", "b")).toBe("not JSON");
    expect(model.get("breakers", "b")).toBeUndefined();

    await write(store, model, "breakers/b", JSON.stringify({ cooldownMs: 1000 }));
    expect(model.invalidReason("breakers", "b")).toBeUndefined();
    expect(model.get("breakers", "b")?.document.cooldownMs).toBe(1000);
  });

  it("files registered nodes under their upstream and marks that upstream changed", async () => {
    const store = await openEmbeddedStore({});
    cleanups.push(() => store.close());
    const { model, changes } = await modelOn(store);
    const node = (address: string) =>
      JSON.stringify({ address, weight: 2, ttlSeconds: 10, registeredAt: "2026-01-01T00:00:00Z" });

    await write(store, model, "registry/agents/n2", node("10.0.0.2:80"));
    await write(store, model, "registry/agents/n1", node("10.0.0.1:80"));
    expect(model.registeredNodes("agents").map((n) => [n.id, n.address])).toEqual([
      ["n1", "10.0.0.1:80"],
      ["n2", "10.0.0.2:80"],
    ]);
    expect(changes.at(-1)?.resources).toEqual(new Set(["upstreams/agents"]));

    await write(store, model, "registry/agents/n1", undefined);
    expect(model.registeredNodes("agents").map((n) => n.id)).toEqual(["n2"]);
  });
});
