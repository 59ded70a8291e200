import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigService, type ResourceChange } from "../resources/config-service.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { ConfigHistory, historyPrefix } from "./config-history.js";

const PREFIX = "/budget/";
let store: Store | undefined;
let config: ConfigService | undefined;

afterEach(async () => {
  await config?.close();
  await store?.close();
  config = undefined;
  store = undefined;
});

async function setUp(maxBytes: number, warnings: string[] = []) {
  store = await openEmbeddedStore({});
  const logger = pino({ level: "warn" }, { write: (line: string) => warnings.push(line) });
  const history = new ConfigHistory({ store, prefix: PREFIX, maxBytes, logger });
  await history.start();
  const service = new ConfigService(store, PREFIX);
  config = service;
  const apply = async (changes: ResourceChange[]) => {
    const result = await service.apply(changes, {
      alsoWrite: (results, writes) =>
        history.operations(
          "ci",
          results.flatMap((r) =>
            r.action === "unchanged" ? [] : [{ kind: r.kind, name: r.name, action: r.action }],
          ),
          writes,
        ),
    });
    if (!result.ok) throw new Error(result.error.message);
    return result.revision;
  };
  return { history, apply };
}

function upstreams(count: number, port: number): ResourceChange[] {
  return Array.from({ length: count }, (_, i) => ({
    kind: "upstreams" as const,
    name: `u-${i}`,
    document: { nodes: [{ address: `127.0.0.1:${port}` }] },
  }));
}

/** What the history's keys hold in the store, keys and values. */
async function storedBytes(): Promise<number> {
  if (store === undefined) throw new Error("no store");
  const read = await store.range(historyPrefix(PREFIX));
  return read.items.reduce(
    (sum, kv) => sum + Buffer.byteLength(kv.key) + Buffer.byteLength(kv.value),
    0,
  );
}

describe("ConfigHistory's byte budget (historyMaxBytes)", () => {
  it("trims the oldest versions beyond the budget, newest kept, however few the versions", async () => {
    const { history, apply } = await setUp(20_000);
    const versions: number[] = [];
    // Each write replaces 20 upstreams: an entry of a few KB, far below historyLimit's count.
    for (let port = 9000; port < 9010; port++) versions.push(await apply(upstreams(20, port)));

    const kept = (await history.list()).map((item) => item.version);
    expect(kept.length).toBeGreaterThan(1);
    expect(kept.length).toBeLessThan(versions.length);
    expect(kept).toEqual(versions.slice(-kept.length).reverse());
    expect(await storedBytes()).toBeLessThanOrEqual(20_000);
    const oldest = kept.at(-1) ?? 0;
    expect((await history.at(oldest)).ok).toBe(true);
    const trimmed = await history.at(versions[0] ?? 0);
    expect(trimmed.ok ? undefined : trimmed.error.code).toBe("CLAWGATE_VERSION_TOO_OLD");
  });

  it("keeps a write whose undo alone exceeds the budget, trims every older one and warns", async () => {
    const warnings: string[] = [];
    const { history, apply } = await setUp(3_000, warnings);
    const small = await apply(upstreams(1, 9001));
    expect(warnings).toEqual([]);

    const big = await apply(upstreams(60, 9002));

    expect((await history.list()).map((item) => item.version)).toEqual([big]);
    const at = await history.at(small);
    expect(at.ok ? undefined : at.error.code).toBe("CLAWGATE_VERSION_TOO_OLD");
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0] ?? "{}")).toMatchObject({
      historyMaxBytes: 3_000,
      msg: expect.stringContaining("exceeds historyMaxBytes"),
    });
  });

  it("a control plane started later knows every entry's size from keys alone and trims by it", async () => {
    const { history, apply } = await setUp(20_000);
    for (let port = 9100; port < 9104; port++) await apply(upstreams(20, port));
    if (store === undefined) throw new Error("no store");
    const real = store;
    let valuesRead = 0;
    const keysOnly = Object.assign(Object.create(real) as Store, {
      range: async (...args: Parameters<Store["range"]>) => {
        const read = await real.range(...args);
        valuesRead += read.items.filter((kv) => kv.value !== "").length;
        return read;
      },
    });
    const restarted = new ConfigHistory({ store: keysOnly, prefix: PREFIX, maxBytes: 20_000 });
    await restarted.start();

    expect(valuesRead).toBe(0);
    expect(restarted.bytes).toBe(history.bytes);
    expect(restarted.bytes).toBeGreaterThan(0);
  });

  it("refuses a budget that is not a positive integer, naming the setting", () => {
    const stub = { txnLimits: { maxOps: 128, maxBytes: 1_000_000 } } as Store;
    expect(() => new ConfigHistory({ store: stub, prefix: PREFIX, maxBytes: 0 })).toThrow(
      /historyMaxBytes must be a positive integer, got 0/,
    );
  });
});
