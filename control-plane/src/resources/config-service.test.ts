import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { applyGateKey } from "./apply-gate.js";
import { ConfigService, configGuardKey } from "./config-service.js";

const PREFIX = "/clawgate/";
const agents = { nodes: [{ address: "127.0.0.1:9001", weight: 3 }] };
const apiRoute = { match: { pathPrefix: "/api" }, upstream: "agents" };

let store: Store;
let config: ConfigService;

beforeEach(async () => {
  store = await openEmbeddedStore({});
  config = new ConfigService(store, PREFIX);
});

afterEach(async () => {
  await store.close();
});

async function seed(): Promise<void> {
  const result = await config.apply([
    { kind: "upstreams", name: "agents", document: agents },
    { kind: "routes", name: "api", document: apiRoute },
  ]);
  expect(result.ok).toBe(true);
}

/** Everything in the store, to prove a refused write changed nothing. */
async function dump(): Promise<unknown> {
  return store.range("");
}

describe("ConfigService.apply", () => {
  it("stores the defaulted document and reports created, then updated, then unchanged", async () => {
    const created = await config.apply([{ kind: "upstreams", name: "agents", document: agents }]);
    expect(created).toMatchObject({
      ok: true,
      dryRun: false,
      results: [{ kind: "upstreams", name: "agents", action: "created" }],
    });
    if (!created.ok) return;
    const stored = await store.get(`${PREFIX}upstreams/agents`);
    expect(stored?.modRevision).toBe(created.revision);
    expect(created.results[0]?.revision).toBe(created.revision);
    const document = JSON.parse(stored?.value ?? "null");
    expect(document.nodes).toEqual([{ address: "127.0.0.1:9001", weight: 3 }]);
    expect(document.healthCheck).toMatchObject({ intervalMs: 10_000, path: "/healthz" });
    expect(document.breaker).toBe("default");

    const same = await config.apply([{ kind: "upstreams", name: "agents", document: agents }]);
    expect(same).toMatchObject({
      ok: true,
      revision: created.revision,
      results: [{ action: "unchanged", revision: created.revision }],
    });

    const changed = await config.apply([
      { kind: "upstreams", name: "agents", document: { nodes: [{ address: "127.0.0.1:9002" }] } },
    ]);
    expect(changed).toMatchObject({ ok: true, results: [{ action: "updated" }] });
    if (changed.ok) expect(changed.revision).toBeGreaterThan(created.revision);
  });

  it("get and list return the stored resource with its revision", async () => {
    await seed();
    const one = await config.get("routes", "api");
    expect(one.ok).toBe(true);
    if (!one.ok) return;
    expect(one.resource.name).toBe("api");
    expect(one.resource.document.retry).toEqual({
      attempts: 2,
      on: ["connect-failure", "reset"],
    });
    expect(one.resource.revision).toBe((await store.get(`${PREFIX}routes/api`))?.modRevision);

    const list = await config.list("upstreams");
    expect(list).toMatchObject({ ok: true, items: [{ name: "agents" }] });

    const missing = await config.get("routes", "nope");
    expect(missing).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_NOT_FOUND", status: 404 },
    });
    const badName = await config.get("routes", "Bad_Name");
    expect(badName).toMatchObject({ ok: false, error: { code: "CLAWGATE_INVALID_NAME" } });
  });

  it("names each bad field by its path and writes nothing", async () => {
    await seed();
    const before = await dump();
    const result = await config.apply([
      {
        kind: "upstreams",
        name: "agents",
        document: { nodes: [{ address: "127.0.0.1:9001", weight: 0 }], colour: "red" },
      },
      { kind: "routes", name: "web", document: { match: {}, upstream: "agents" } },
    ]);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.code).toBe("CLAWGATE_INVALID_RESOURCE");
    expect(result.error.status).toBe(400);
    const paths = (result.error.details as { kind: string; path: string }[]).map(
      (detail) => `${detail.kind}:${detail.path}`,
    );
    expect(paths).toEqual(
      expect.arrayContaining([
        "upstreams:nodes.0.weight",
        "upstreams:colour",
        "routes:match.pathPrefix",
      ]),
    );
    expect(await dump()).toEqual(before);
  });

  it("rejects invalid names", async () => {
    const result = await config.apply([{ kind: "upstreams", name: "-x", document: agents }]);
    expect(result).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_INVALID_NAME", status: 400 },
    });
  });

  it("refuses a route to a missing upstream and leaves the store as it was", async () => {
    const before = await dump();
    const result = await config.apply([{ kind: "routes", name: "api", document: apiRoute }]);
    expect(result).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_REFERENCE_CONFLICT", status: 409 },
    });
    if (!result.ok) expect(result.error.message).toContain("agents");
    expect(await dump()).toEqual(before);
  });

  it("accepts a route and its upstream in one change set", async () => {
    await seed();
    expect((await config.get("routes", "api")).ok).toBe(true);
  });

  it("refuses deleting an upstream a route uses, naming the routes", async () => {
    await seed();
    await config.apply([
      {
        kind: "routes",
        name: "canary",
        document: { match: { path: "/c" }, split: [{ upstream: "agents", weight: 1 }] },
      },
    ]);
    const before = await dump();
    const result = await config.apply([{ kind: "upstreams", name: "agents", delete: true }]);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.code).toBe("CLAWGATE_REFERENCE_CONFLICT");
    expect(result.error.message).toBe("upstream agents is used by routes api, canary");
    expect(result.error.details).toEqual([
      {
        kind: "routes",
        name: "api",
        field: "upstream",
        message: "route api uses upstream agents, which this change deletes",
      },
      {
        kind: "routes",
        name: "canary",
        field: "split.0.upstream",
        message: "route canary uses upstream agents, which this change deletes",
      },
    ]);
    expect(await dump()).toEqual(before);
  });

  it("refuses deleting a breaker an upstream uses", async () => {
    await config.apply([
      { kind: "breakers", name: "strict", document: { consecutiveFailures: 2 } },
      { kind: "upstreams", name: "agents", document: { ...agents, breaker: "strict" } },
    ]);
    const result = await config.apply([{ kind: "breakers", name: "strict", delete: true }]);
    expect(result).toMatchObject({
      ok: false,
      error: {
        code: "CLAWGATE_REFERENCE_CONFLICT",
        message: "breaker strict is used by upstreams agents",
      },
    });
  });

  it("deletes a resource nothing uses and answers 404 for one that is gone", async () => {
    await seed();
    const deleted = await config.apply([{ kind: "routes", name: "api", delete: true }]);
    expect(deleted).toMatchObject({ ok: true, results: [{ action: "deleted" }] });
    expect(await store.get(`${PREFIX}routes/api`)).toBeUndefined();
    const again = await config.apply([{ kind: "routes", name: "api", delete: true }]);
    expect(again).toMatchObject({ ok: false, error: { code: "CLAWGATE_NOT_FOUND", status: 404 } });
  });

  it("honours ifMatch on put and delete, 0 meaning must not exist", async () => {
    await seed();
    const current = await config.get("upstreams", "agents");
    if (!current.ok) throw new Error("seed failed");
    const revision = current.resource.revision;
    const before = await dump();
    const stale = await config.apply([
      { kind: "upstreams", name: "agents", document: { nodes: [] }, ifMatch: revision - 1 },
    ]);
    expect(stale).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_PRECONDITION_FAILED", status: 412 },
    });
    const exists = await config.apply([
      { kind: "upstreams", name: "agents", document: agents, ifMatch: 0 },
    ]);
    expect(exists).toMatchObject({ ok: false, error: { code: "CLAWGATE_PRECONDITION_FAILED" } });
    const staleDelete = await config.apply([
      { kind: "routes", name: "api", delete: true, ifMatch: 1_000 },
    ]);
    expect(staleDelete).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_PRECONDITION_FAILED" },
    });
    expect(await dump()).toEqual(before);

    const fresh = await config.apply([
      {
        kind: "upstreams",
        name: "agents",
        document: { nodes: [{ address: "127.0.0.1:9009" }] },
        ifMatch: revision,
      },
    ]);
    expect(fresh).toMatchObject({ ok: true, results: [{ action: "updated" }] });
  });

  it("dry run checks everything and writes nothing", async () => {
    await seed();
    const before = await dump();
    const result = await config.apply(
      [
        { kind: "upstreams", name: "other", document: agents },
        { kind: "routes", name: "api", delete: true },
      ],
      { dryRun: true },
    );
    expect(result).toMatchObject({
      ok: true,
      dryRun: true,
      results: [
        { name: "other", action: "created", revision: 0 },
        { name: "api", action: "deleted" },
      ],
    });
    expect(await dump()).toEqual(before);
    const refused = await config.apply([{ kind: "upstreams", name: "agents", delete: true }], {
      dryRun: true,
    });
    expect(refused).toMatchObject({ ok: false, error: { code: "CLAWGATE_REFERENCE_CONFLICT" } });
  });

  it("prunes resources of the listed kinds that the change set does not name", async () => {
    await seed();
    await config.apply([
      { kind: "upstreams", name: "spare", document: agents },
      { kind: "tenants", name: "acme", document: {} },
    ]);
    const result = await config.apply(
      [
        { kind: "upstreams", name: "agents", document: agents },
        { kind: "routes", name: "api", document: apiRoute },
      ],
      { prune: ["upstreams", "routes"] },
    );
    expect(result).toMatchObject({
      ok: true,
      results: [
        { name: "agents", action: "unchanged" },
        { name: "api", action: "unchanged" },
        { kind: "upstreams", name: "spare", action: "deleted" },
      ],
    });
    expect(await store.get(`${PREFIX}upstreams/spare`)).toBeUndefined();
    expect(await store.get(`${PREFIX}tenants/acme`)).toBeDefined();

    // prune: true covers every kind, and still refuses to strand a route.
    const stranding = await config.apply([{ kind: "routes", name: "api", document: apiRoute }], {
      prune: true,
    });
    expect(stranding).toMatchObject({
      ok: false,
      error: {
        code: "CLAWGATE_REFERENCE_CONFLICT",
        message: "upstream agents is used by routes api",
      },
    });
    const all = await config.apply([], { prune: true });
    expect(all.ok).toBe(true);
    expect(await config.list("tenants")).toMatchObject({ ok: true, items: [] });
    expect((await store.range(`${PREFIX}routes/`)).items).toEqual([]);
  });

  it("does not let an earlier broken reference block unrelated writes", async () => {
    // Written around the API, straight into the store.
    await store.commit(
      [],
      [{ type: "put", key: `${PREFIX}routes/orphan`, value: JSON.stringify(apiRoute) }],
    );
    const result = await config.apply([{ kind: "tenants", name: "acme", document: {} }]);
    expect(result.ok).toBe(true);
  });

  it("commits changes, their compares, the guard key, the closed gate and the rollout in one transaction", async () => {
    const commits: { compares: unknown[]; operations: unknown[] }[] = [];
    const spy: Store = {
      ...store,
      kind: store.kind,
      commit: async (compares, operations) => {
        commits.push({ compares: [...compares], operations: [...operations] });
        return store.commit(compares, operations);
      },
    };
    const service = new ConfigService(spy, PREFIX);
    await service.apply([
      { kind: "upstreams", name: "agents", document: agents },
      { kind: "routes", name: "api", document: apiRoute },
    ]);
    expect(commits).toHaveLength(1);
    expect(commits[0]?.compares).toEqual([
      { key: `${PREFIX}upstreams/agents`, modRevision: 0 },
      { key: `${PREFIX}routes/api`, modRevision: 0 },
      { key: configGuardKey(PREFIX), modRevision: 0 },
      // No big apply may be half-way through (staged-apply.ts).
      { key: applyGateKey(PREFIX), modRevision: 0 },
      // No rollout may have started meanwhile (rollout-fence.ts).
      { key: `${PREFIX}rollout/current`, modRevision: 0 },
    ]);
    expect(commits[0]?.operations).toMatchObject([
      { type: "put", key: `${PREFIX}upstreams/agents` },
      { type: "put", key: `${PREFIX}routes/api` },
      { type: "put", key: configGuardKey(PREFIX) },
    ]);
  });

  it("re-reads after a concurrent write, so a route added meanwhile blocks the delete", async () => {
    await config.apply([{ kind: "upstreams", name: "agents", document: agents }]);
    const other = new ConfigService(store, PREFIX);
    let commits = 0;
    const racing: Store = {
      ...store,
      kind: store.kind,
      commit: async (compares, operations) => {
        commits++;
        if (commits === 1) {
          // Another admin adds a route to the upstream between our read and our commit.
          const raced = await other.apply([{ kind: "routes", name: "api", document: apiRoute }]);
          expect(raced.ok).toBe(true);
        }
        return store.commit(compares, operations);
      },
    };
    const result = await new ConfigService(racing, PREFIX).apply([
      { kind: "upstreams", name: "agents", delete: true },
    ]);
    expect(commits).toBe(1);
    expect(result).toMatchObject({
      ok: false,
      error: {
        code: "CLAWGATE_REFERENCE_CONFLICT",
        message: "upstream agents is used by routes api",
      },
    });
    expect(await store.get(`${PREFIX}upstreams/agents`)).toBeDefined();
  });

  it("gives up with CLAWGATE_STORE_CONFLICT after the bounded retries", async () => {
    const other = new ConfigService(store, PREFIX);
    let commits = 0;
    const busy: Store = {
      ...store,
      kind: store.kind,
      commit: async (compares, operations) => {
        commits++;
        await other.apply([{ kind: "tenants", name: `t${commits}`, document: {} }]);
        return store.commit(compares, operations);
      },
    };
    const result = await new ConfigService(busy, PREFIX, { maxAttempts: 3 }).apply([
      { kind: "upstreams", name: "agents", document: agents },
    ]);
    expect(commits).toBe(3);
    expect(result).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_STORE_CONFLICT", status: 409 },
    });
    expect(await store.get(`${PREFIX}upstreams/agents`)).toBeUndefined();
  });

  it("reports a failing store as CLAWGATE_STORE_UNAVAILABLE", async () => {
    const broken: Store = {
      ...store,
      kind: store.kind,
      range: async () => {
        throw new Error("connection refused");
      },
    };
    const result = await new ConfigService(broken, PREFIX).apply([
      { kind: "tenants", name: "acme", document: {} },
    ]);
    expect(result).toMatchObject({
      ok: false,
      error: { code: "CLAWGATE_STORE_UNAVAILABLE", status: 503 },
    });
  });
});
