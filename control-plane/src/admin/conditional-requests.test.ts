import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigService } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/clawgate/";
const agents = { nodes: [{ address: "127.0.0.1:9001" }] };
const other = { nodes: [{ address: "127.0.0.1:9002" }] };

let etcd: EtcdProcess | undefined;
afterAll(async () => {
  await etcd?.stop();
});

// The same behaviour on both stores: If-None-Match: * leans on the store's compare of a key's
// revision against 0 inside the write transaction, which etcd and the embedded store each do.
const stores: [string, () => Promise<Store>][] = [
  ["embedded", () => openEmbeddedStore({})],
  [
    "etcd",
    async () => {
      etcd ??= await startEtcd();
      return openEtcdStore({ endpoints: [etcd.endpoint] });
    },
  ],
];

describe.each(stores)("conditional requests on the %s store", (_, open) => {
  let store: Store;
  let app: FastifyInstance;
  let n = 0;
  /** A fresh name per test: the etcd store is shared by the tests of this file. */
  let name: string;

  beforeAll(async () => {
    store = await open();
    app = await buildAdminApp({
      config: new ConfigService(store, PREFIX),
      snapshot: {
        status: () => ({
          version: 1,
          published: true,
          publishedVersion: 1,
          counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
        }),
      },
      fleet: { list: () => [] },
    });
  });
  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  function put(body: unknown, headers: Record<string, string> = {}) {
    return app.inject({
      method: "PUT",
      url: `/v1/upstreams/${name}`,
      payload: body as object,
      headers,
    });
  }
  function get(headers: Record<string, string> = {}) {
    return app.inject({ method: "GET", url: `/v1/upstreams/${name}`, headers });
  }

  it("If-None-Match: * creates, then answers 412 and leaves the resource as it was", async () => {
    name = `create-only-${n++}`;
    const created = await put(agents, { "if-none-match": "*" });
    expect(created.statusCode).toBe(201);

    const again = await put(other, { "if-none-match": "*" });
    expect(again.statusCode).toBe(412);
    expect(again.json().error).toMatchObject({
      code: "CLAWGATE_PRECONDITION_FAILED",
      message: `upstream ${name} already exists (revision ${created.json().revision}); If-None-Match: * only creates`,
    });
    const read = await get();
    expect(read.json().spec.nodes).toEqual([{ address: "127.0.0.1:9001", weight: 1 }]);
    expect(read.headers.etag).toBe(created.headers.etag);
  });

  it("If-None-Match: * lets exactly one of several concurrent creates win", async () => {
    name = `race-${n++}`;
    const bodies = [1, 2, 3, 4, 5].map((i) => ({ nodes: [{ address: `127.0.0.1:90${10 + i}` }] }));
    const answers = await Promise.all(bodies.map((body) => put(body, { "if-none-match": "*" })));
    const codes = answers.map((answer) => answer.statusCode).sort();
    expect(codes).toEqual([201, 412, 412, 412, 412]);
    const winner = answers.find((answer) => answer.statusCode === 201);
    expect((await get()).json().spec).toEqual(winner?.json().spec);
  });

  it("If-None-Match with the current ETag refuses a PUT; with an old one it writes", async () => {
    name = `none-match-${n++}`;
    const created = await put(agents);
    const tag = created.headers.etag as string;
    const refused = await put(other, { "if-none-match": `"1", ${tag}` });
    expect(refused.statusCode).toBe(412);
    expect(refused.json().error.message).toContain("which If-None-Match excludes");
    const written = await put(other, { "if-none-match": '"1"' });
    expect(written.statusCode).toBe(200);
  });

  it("a GET naming the current ETag gets 304 and no body, also in a list and weakly", async () => {
    name = `not-modified-${n++}`;
    const created = await put(agents);
    const tag = created.headers.etag as string;
    for (const header of [tag, `W/${tag}`, `"1", ${tag}`, `"1", W/${tag}`, "*"]) {
      const response = await get({ "if-none-match": header });
      expect(response.statusCode, header).toBe(304);
      expect(response.body, header).toBe("");
      expect(response.headers.etag, header).toBe(tag);
    }
    for (const header of ['"1"', 'W/"1"', '"abc"', ""]) {
      const response = await get({ "if-none-match": header });
      expect(response.statusCode, header).toBe(200);
      expect(response.json().spec.nodes[0].address).toBe("127.0.0.1:9001");
    }
    // After a change the old tag no longer matches.
    await put(other);
    const changed = await get({ "if-none-match": tag });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(tag);
  });
});
