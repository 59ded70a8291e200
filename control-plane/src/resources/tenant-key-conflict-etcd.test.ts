import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEtcdStore } from "../store/etcd-store.js";
import type { Store } from "../store/store.js";
import { type EtcdProcess, startEtcd } from "../testing/etcd-process.js";
import { ConfigService } from "./config-service.js";

const PREFIX = "/clawgate/";
const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const holding = (...keys: string[]) => ({ apiKeySha256: keys.map(sha) });

let etcd: EtcdProcess;
let store: Store;
/** Two control planes on one etcd, each judging writes on its own model. */
let first: ConfigService;
let second: ConfigService;

beforeAll(async () => {
  etcd = await startEtcd();
  store = await openEtcdStore({ endpoints: [etcd.endpoint] });
  first = new ConfigService(store, PREFIX);
  second = new ConfigService(store, PREFIX);
});

afterAll(async () => {
  await first?.close();
  await second?.close();
  await store?.close();
  await etcd?.stop();
});

// Two tenants with one key hash made the key whichever tenant the data plane indexed last:
// zeta, given alpha's hash, was served as alpha's key.
describe("a tenant key hash another tenant holds", () => {
  it("is refused with 409 naming both tenants, and nothing is written", async () => {
    expect(
      (await first.apply([{ kind: "tenants", name: "alpha", document: holding("a") }])).ok,
    ).toBe(true);
    const refused = await first.apply([
      { kind: "tenants", name: "zeta", document: holding("z", "a") },
    ]);
    expect(refused).toMatchObject({
      ok: false,
      error: {
        code: "CLAWGATE_TENANT_KEY_CONFLICT",
        status: 409,
        message: "tenant zeta holds an API key hash that tenant alpha holds too",
        details: [{ kind: "tenants", name: "zeta", path: "apiKeySha256.1" }],
      },
    });
    expect(await store.get(`${PREFIX}tenants/zeta`)).toBeUndefined();
    // Moving a key from one tenant to another in one apply is no conflict.
    const moved = await first.apply([
      { kind: "tenants", name: "alpha", document: holding("a2") },
      { kind: "tenants", name: "zeta", document: holding("a") },
    ]);
    expect(moved.ok).toBe(true);
  });

  it("is refused within one apply too", async () => {
    const refused = await second.apply([
      { kind: "tenants", name: "beta", document: holding("shared") },
      { kind: "tenants", name: "gamma", document: holding("shared") },
    ]);
    expect(refused).toMatchObject({ ok: false, error: { code: "CLAWGATE_TENANT_KEY_CONFLICT" } });
    if (refused.ok) return;
    expect(refused.error.message).toContain("tenant beta");
    expect(refused.error.message).toContain("tenant gamma");
    expect(await store.get(`${PREFIX}tenants/beta`)).toBeUndefined();
  });

  it("lets only one of two concurrent writes of the same hash win", async () => {
    // Both models caught up (an unchanged write waits for none), so each judges the write on a
    // config without the other one: only the commit's compare can stop the second.
    for (const service of [first, second]) {
      await service.apply([{ kind: "tenants", name: "alpha", document: holding("a2") }]);
    }
    const [one, two] = await Promise.all([
      first.apply([{ kind: "tenants", name: "delta", document: holding("race") }]),
      second.apply([{ kind: "tenants", name: "omega", document: holding("race") }]),
    ]);
    expect([one.ok, two.ok].sort()).toEqual([false, true]);
    const lost = one.ok ? two : one;
    expect(lost).toMatchObject({ ok: false, error: { code: "CLAWGATE_TENANT_KEY_CONFLICT" } });
    if (lost.ok) return;
    expect(lost.error.message).toMatch(/tenant (delta|omega) .* tenant (omega|delta) holds too/);
    const stored = await store.range(`${PREFIX}tenants/`);
    const holders = stored.items.filter((item) => item.value.includes(sha("race")));
    expect(holders).toHaveLength(1);
  });
});
