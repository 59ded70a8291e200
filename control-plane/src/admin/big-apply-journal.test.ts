import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigHistory } from "../history/config-history.js";
import { ConfigAudit } from "../journal/config-audit.js";
import { Journal } from "../journal/journal.js";
import { ConfigService } from "../resources/config-service.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { buildAdminApp } from "./app.js";

// etcd as deployed: --max-request-bytes 1.5 MiB (gRPC takes 2 MiB), --max-txn-ops 128. An apply
// of 20,000 resources lists about 1 MB of changes; the audit event and the history entry both
// commit in the transaction that closes the apply, so carrying both lists there broke it.
const PREFIX = "/journal-big/";
const COUNT = 20_000;
let etcd: EtcdProcess;
let store: Store;
let config: ConfigService;
let app: FastifyInstance;

const status: SnapshotStatus = {
  version: 1,
  published: true,
  publishedVersion: 1,
  counts: { routes: 0, upstreams: 0, breakers: 0, tenants: 0 },
};

beforeAll(async () => {
  etcd = await startEtcd();
  store = await openEtcdStore({ endpoints: [etcd.endpoint] });
  const audit = new ConfigAudit({ store, prefix: PREFIX });
  await audit.start();
  const history = new ConfigHistory({ store, prefix: PREFIX });
  await history.start();
  config = new ConfigService(store, PREFIX);
  app = await buildAdminApp({
    config,
    snapshot: { status: () => status },
    fleet: { list: () => [] },
    audit,
    history,
    journal: new Journal({ store, prefix: PREFIX }),
  });
});
afterAll(async () => {
  await app?.close();
  await config?.close();
  await store?.close();
  await etcd?.stop();
});

describe("an apply of 20,000 resources through the admin API, journaled", () => {
  it("commits, and the audit and the history list every resource it changed", async () => {
    const resources = Array.from({ length: COUNT }, (_, i) => ({
      kind: "upstream",
      name: `u-${i}`,
      spec: { nodes: [{ address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:80` }] },
    }));

    const applied = await app.inject({
      method: "POST",
      url: "/v1/apply",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ resources }),
    });

    expect(applied.statusCode, applied.body).toBe(200);
    const { revision } = applied.json();
    const events = await app.inject({ method: "GET", url: "/v1/events?type=config&limit=1" });
    const [event] = events.json().items;
    expect(event.revision).toBe(revision);
    expect(event.changes).toHaveLength(COUNT);
    expect(event.changes[COUNT - 1]).toEqual({
      kind: "upstreams",
      name: `u-${COUNT - 1}`,
      action: "created",
    });
    const listed = await app.inject({ method: "GET", url: "/v1/history?limit=1" });
    const [item] = listed.json().items;
    expect(item.version).toBe(revision);
    expect(item.summary).toBe(`${COUNT} created`);
    expect(item.changes).toHaveLength(COUNT);
  }, 120_000);
});
