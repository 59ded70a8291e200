import { RESOURCE_KINDS } from "@clawgate/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { applyGateKey, applyUndoPrefix } from "./apply-gate.js";
import { ConfigService, type ResourceChange } from "./config-service.js";

// etcd with its default request limit (1.5 MiB): what the commit closing a big apply must fit.
const PREFIX = "/closing/";
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

function upstreams(count: number, port: number): ResourceChange[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: "upstreams" as const,
    name: `u-${i}`,
    document: { nodes: [{ address: `127.0.0.1:${port}` }] },
  }));
}

/** Config, gate and undo records: everything a refused apply must leave as it was. */
async function dump(): Promise<Record<string, string>> {
  const read = await store.range([
    ...RESOURCE_KINDS.map((kind) => `${PREFIX}${kind}/`),
    applyGateKey(PREFIX),
    applyUndoPrefix(PREFIX),
    `${PREFIX}journal-test`,
  ]);
  return Object.fromEntries(read.items.map((kv) => [kv.key, kv.value]));
}

describe("the commit that closes a staged apply", () => {
  it("is checked up front: journal writes too big for it get 413 naming the limit, nothing written", async () => {
    const config = new ConfigService(store, PREFIX);
    expect((await config.apply(upstreams(10, 9001))).ok).toBe(true);
    const before = await dump();

    // 300 resources are staged (over 128 operations); a 1.6 MB journal write cannot close it.
    const result = await config.apply(upstreams(300, 9002), {
      alsoWrite: () => [
        { type: "put", key: `${PREFIX}journal-test`, value: "x".repeat(1_600_000) },
      ],
    });

    expect(result.ok ? undefined : result.error.code).toBe("CLAWGATE_PAYLOAD_TOO_LARGE");
    expect(result.ok ? undefined : result.error.message).toMatch(
      /closing commit would carry \d+ operations and \d+ bytes .* at most 128 operations and \d+ bytes per commit \(etcd --max-txn-ops, --max-request-bytes\)/,
    );
    expect(await dump()).toEqual(before);
    await config.close();
  }, 60_000);
});
