import { create, QuotaConsumptionSchema, QuotaKind } from "@clawgate/proto";
import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedStore } from "../store/embedded-store.js";
import type { Store } from "../store/store.js";
import { type LeaseGrant, QuotaLedger } from "./quota-ledger.js";
import { StoredWindowCounter } from "./stored-window-counter.js";

const RPM = QuotaKind.REQUESTS_PER_MINUTE;
const TPM = QuotaKind.TOKENS_PER_MINUTE;
const quiet = { debug() {}, info() {}, warn() {} };

function ask(consumed: number, kind = RPM, wantsMore = true) {
  return create(QuotaConsumptionSchema, {
    tenant: "acme",
    kind,
    window: 0n,
    consumed: BigInt(consumed),
    wantsMore,
  });
}

/** One control-plane replica with one data plane ("holder") connected to it. */
class Replica {
  readonly ledger: QuotaLedger;
  readonly #inbox: LeaseGrant[] = [];
  #notify: (() => void) | undefined;

  constructor(
    readonly holder: string,
    counter: StoredWindowCounter,
    limit: number,
  ) {
    this.ledger = new QuotaLedger({
      limitOf: () => limit,
      holders: () => 1,
      now: () => 5_000,
      counter,
    });
    this.ledger.connect(holder, (grants) => {
      this.#inbox.push(...grants);
      this.#notify?.();
    });
  }

  /** Reports `consumed` and waits for the answer, given at once or delivered when a block came. */
  async ask(consumed: number, kind = RPM): Promise<LeaseGrant> {
    const [answer] = this.ledger.report(this.holder, [ask(consumed, kind)]);
    return answer ?? this.next();
  }

  /** The next grant delivered unasked. */
  async next(): Promise<LeaseGrant> {
    while (this.#inbox.length === 0) {
      await new Promise<void>((resolve) => {
        this.#notify = resolve;
      });
    }
    return this.#inbox.shift() as LeaseGrant;
  }
}

describe("QuotaLedger on two control-plane replicas sharing the store", () => {
  let store: Store;
  const counters: StoredWindowCounter[] = [];
  const replica = async (holder: string, limit: number) => {
    const counter = new StoredWindowCounter({
      store,
      prefix: "/t/",
      logger: quiet,
      now: () => 5_000,
    });
    await counter.start();
    counters.push(counter);
    return new Replica(holder, counter, limit);
  };
  afterEach(async () => {
    for (const counter of counters.splice(0)) await counter.stop();
    await store?.close();
  });

  it("leases 20 in all across both, not 20 each", async () => {
    store = await openEmbeddedStore({});
    const replicas = [await replica("a", 20), await replica("b", 20)];
    const spent = new Map<Replica, number>();
    let leased = 0;
    // Each data plane spends every share at once and asks again, taking turns.
    for (let turn = 0; turn < 40; turn++) {
      const on = replicas[turn % 2] as Replica;
      const grant = await on.ask(spent.get(on) ?? 0);
      spent.set(on, grant.granted);
      leased += grant.granted;
    }
    expect(leased).toBe(20);
  });

  it("revokes an unspent share on one replica when tokens spent through the other pass the limit", async () => {
    store = await openEmbeddedStore({});
    const [one, two] = [await replica("a", 100), await replica("b", 100)];
    expect((await two.ask(0, TPM)).granted).toBeGreaterThan(0);
    await one.ask(0, TPM);
    // Usage is debited after the response: 130 tokens through replica one, past the whole 100.
    one.ledger.report("a", [ask(130, TPM, false)]);
    expect(await two.next()).toMatchObject({
      kind: TPM,
      granted: 0,
      exhausted: true,
      revoked: true,
    });
    expect(await two.ask(0, TPM)).toMatchObject({ exhausted: true });
  });
});
