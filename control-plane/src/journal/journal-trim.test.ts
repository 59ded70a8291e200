import { afterAll, beforeAll, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { MAX_EVIDENCE_CHARS } from "./heal-event.js";
import { Journal } from "./journal.js";

// Trimming the journal must not read what the events say: on real etcd, the bytes etcd sends
// while a journal resyncs and trims stay far below the size of the events it trims.
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

/** Bytes etcd has sent to its gRPC clients, from its own /metrics. */
async function etcdSentBytes(): Promise<number> {
  const text = await (await fetch(`${etcd.endpoint}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith("etcd_network_client_grpc_sent_bytes_total"));
  if (line === undefined)
    throw new Error("etcd does not report etcd_network_client_grpc_sent_bytes_total");
  return Number(line.split(" ")[1]);
}

it("trims old events reading their keys only, never their values", async () => {
  const prefix = "/trim/";
  const writer = new Journal({ store, prefix, maxEvents: 10_000 });
  const evidence = "x".repeat(MAX_EVIDENCE_CHARS);
  await Promise.all(
    Array.from({ length: 400 }, (_, i) =>
      writer.record({
        upstream: "agents",
        node: `10.0.0.${i % 250}:80`,
        action: "evict",
        evidence,
        source: "dp-1",
      }),
    ),
  );
  const stored = await store.range(`${prefix}events/`);
  expect(stored.items).toHaveLength(400);
  const storedBytes = stored.items.reduce((sum, item) => sum + item.value.length, 0);

  // A second control plane's journal, bounded to 100: its first write reads the keys and trims.
  const trimming = new Journal({ store, prefix, maxEvents: 100 });
  const before = await etcdSentBytes();
  const newest = await trimming.record({ upstream: "agents", action: "readmit", source: "cp" });
  const sent = (await etcdSentBytes()) - before;

  const left = (await store.range(`${prefix}events/`, { keysOnly: true })).items;
  expect(left).toHaveLength(100);
  expect(left.at(-1)?.key).toBe(`${prefix}events/${newest.id}`);
  expect(left.every((item) => item.value === "")).toBe(true);
  // A full read would send every trimmed event (800 KB); keys are about 40 bytes each.
  expect(storedBytes).toBeGreaterThan(800_000);
  expect(sent).toBeLessThan(storedBytes / 20);
}, 60_000);
