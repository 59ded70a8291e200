import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigService } from "../resources/config-service.js";
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from "../resources/list-page.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { KeyValue, Store } from "../store/store.js";
import { buildAdminApp } from "./app.js";

const PREFIX = "/pages/";
const COUNT = 250;
const status: SnapshotStatus = {
  version: 1,
  published: true,
  publishedVersion: 1,
  counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
};

interface Page {
  items: { name: string }[];
  revision: number;
  continue?: string;
  remainingItemCount?: number;
}

/** The store, recording the key of every item a read hands back (to see what a request read). */
function recording(store: Store, keys: string[]): Store {
  const note = (item: KeyValue | undefined) => {
    if (item !== undefined) keys.push(item.key);
  };
  return Object.assign(Object.create(store) as Store, {
    get: async (...args: Parameters<Store["get"]>) => {
      const item = await store.get(...args);
      note(item);
      return item;
    },
    range: async (...args: Parameters<Store["range"]>) => {
      const read = await store.range(...args);
      for (const item of read.items) note(item);
      return read;
    },
  });
}

let base: Store;
let config: ConfigService;
let app: FastifyInstance;
const read: string[] = [];

beforeEach(async () => {
  base = await openEmbeddedStore({});
  config = new ConfigService(recording(base, read), PREFIX);
  app = await buildAdminApp({
    config,
    snapshot: { status: () => status },
    fleet: { list: () => [] },
  });
  // Names whose order by code units differs from their numeric order, and prefixes of others.
  const names = Array.from({ length: COUNT }, (_, i) => `u-${i}`);
  const written = await config.apply(
    names.map((name, i) => ({
      kind: "upstreams" as const,
      name,
      document: { nodes: [{ address: `10.0.${i >> 8}.${i & 255}:80` }] },
    })),
  );
  expect(written.ok).toBe(true);
});
afterEach(async () => {
  await app.close();
  await config.close();
  await base.close();
  read.length = 0;
});

async function page(query: string): Promise<Page> {
  const response = await app.inject({ method: "GET", url: `/v1/upstreams${query}` });
  expect(response.statusCode).toBe(200);
  return response.json<Page>();
}

describe("GET /v1/{kind} in pages", () => {
  it("answers a small first page that says more follow, and the pages together list each once, in order", async () => {
    const first = await page("");
    expect(first.items).toHaveLength(DEFAULT_PAGE_LIMIT);
    // A client that ignores paging still sees there is more.
    expect(first.continue).toEqual(expect.any(String));
    expect(first.remainingItemCount).toBe(COUNT - DEFAULT_PAGE_LIMIT);

    const names = first.items.map((item) => item.name);
    let next = first.continue;
    while (next !== undefined) {
      const more = await page(`?limit=70&continue=${encodeURIComponent(next)}`);
      expect(more.items.length).toBeLessThanOrEqual(70);
      names.push(...more.items.map((item) => item.name));
      next = more.continue;
      if (next === undefined) expect(more.remainingItemCount).toBeUndefined();
    }
    const expected = Array.from({ length: COUNT }, (_, i) => `u-${i}`).sort();
    expect(names).toEqual(expected);
  });

  it("resumes after the last name seen, so a resource deleted between pages skips nothing", async () => {
    const first = await page("?limit=10");
    const last = first.items.at(-1)?.name as string;
    expect((await app.inject({ method: "DELETE", url: `/v1/upstreams/${last}` })).statusCode).toBe(
      200,
    );
    const second = await page(`?limit=10&continue=${encodeURIComponent(first.continue ?? "")}`);
    const all = Array.from({ length: COUNT }, (_, i) => `u-${i}`).sort();
    expect(second.items.map((item) => item.name)).toEqual(all.slice(10, 20));
  });

  it("refuses a limit out of range and a continue token it did not give, naming the field", async () => {
    for (const query of [`?limit=${MAX_PAGE_LIMIT + 1}`, "?limit=0", "?continue=not-a-token"]) {
      const response = await app.inject({ method: "GET", url: `/v1/upstreams${query}` });
      expect(response.statusCode).toBe(400);
      expect(response.json().error.message).toMatch(/limit|continue/);
    }
  });

  it("serves pages from the model in memory, reading no config document from the store", async () => {
    await page("");
    read.length = 0;
    const second = await page(`?limit=${MAX_PAGE_LIMIT}`);
    expect(second.items).toHaveLength(COUNT);
    expect(read.filter((key) => key.startsWith(`${PREFIX}upstreams/`))).toEqual([]);
  });
});

describe("GET /v1/{kind}/{name}", () => {
  it("reads that resource alone, not every name it prefixes (u-1 is a prefix of u-10..u-199)", async () => {
    read.length = 0;
    const one = await app.inject({ method: "GET", url: "/v1/upstreams/u-1" });
    expect(one.statusCode).toBe(200);
    expect(one.json().name).toBe("u-1");
    expect(read.filter((key) => key.startsWith(`${PREFIX}upstreams/`))).toEqual([]);
    const missing = await app.inject({ method: "GET", url: "/v1/upstreams/u-1000" });
    expect(missing.statusCode).toBe(404);
  });
});
