import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { buildAdminApp } from "../admin/app.js";
import { ConfigService } from "../resources/config-service.js";
import { MAX_PAGE_LIMIT } from "../resources/list-page.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { runClawctl } from "./clawctl-program.js";

const TOKEN = "clawctl-pages-token-0123456789";
// More than the largest page the API answers, so a listing takes two pages at least.
const COUNT = MAX_PAGE_LIMIT + 20;
const status: SnapshotStatus = {
  version: 1,
  published: true,
  publishedVersion: 1,
  counts: { routes: 0, upstreams: 0, breakers: COUNT, tenants: 0 },
};

let store: Store;
let config: ConfigService;
let app: FastifyInstance;
let server: string;

beforeAll(async () => {
  store = await openEmbeddedStore({});
  config = new ConfigService(store, "/clawgate/");
  app = await buildAdminApp({
    config,
    snapshot: { status: () => status },
    fleet: { list: () => [] },
    token: TOKEN,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  server = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const written = await config.apply(
    Array.from({ length: COUNT }, (_, i) => ({
      kind: "breakers" as const,
      name: `b-${i}`,
      document: { consecutiveFailures: 2 },
    })),
  );
  expect(written.ok).toBe(true);
});
afterAll(async () => {
  await app.close();
  await config.close();
  await store.close();
});

async function clawctl(args: string[]): Promise<string> {
  let stdout = "";
  const code = await runClawctl(args, {
    env: { CLAWGATE_ADMIN_URL: server, CLAWGATE_ADMIN_TOKEN: TOKEN },
    stdout: (text) => {
      stdout += text;
    },
    stderr: () => {},
  });
  expect(code).toBe(0);
  return stdout;
}

describe("clawctl follows the list pages", () => {
  it("get <kind> shows every resource, in every output format", async () => {
    const table = (await clawctl(["get", "breakers"])).trimEnd().split("\n");
    expect(table).toHaveLength(COUNT + 1);
    const json = JSON.parse(await clawctl(["get", "breakers", "-o", "json"]));
    expect(new Set(json.items.map((item: { name: string }) => item.name)).size).toBe(COUNT);
    expect(parseAllDocuments(await clawctl(["get", "breakers", "-o", "yaml"]))).toHaveLength(COUNT);
  });

  it("get all and dump hold every resource", async () => {
    const all = JSON.parse(await clawctl(["get", "all", "-o", "json"]));
    expect(all.breakers).toHaveLength(COUNT);
    expect(parseAllDocuments(await clawctl(["dump"]))).toHaveLength(COUNT);
  });
});
