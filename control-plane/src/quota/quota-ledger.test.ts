import { create, QuotaConsumptionSchema, QuotaKind } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { type LeaseGrant, QuotaLedger, UNLIMITED_GRANT } from "./quota-ledger.js";

const RPM = QuotaKind.REQUESTS_PER_MINUTE;

function ask(consumed = 0, window = 0, wantsMore = true, kind = RPM) {
  return create(QuotaConsumptionSchema, {
    tenant: "acme",
    kind,
    window: BigInt(window),
    consumed: BigInt(consumed),
    wantsMore,
  });
}

function ledger(limit: number, holders = 2, clock = { now: 0 }) {
  return new QuotaLedger({
    limitOf: () => limit,
    holders: () => holders,
    now: () => clock.now,
  });
}

/** Two data planes taking turns, each spending its lease and asking again when it is empty. */
function admitted(book: QuotaLedger, offered: number): number {
  const lease = new Map<string, number>([
    ["a", 0],
    ["b", 0],
  ]);
  const consumed = new Map<string, number>([
    ["a", 0],
    ["b", 0],
  ]);
  const exhausted = new Set<string>();
  let admittedCount = 0;
  for (let i = 0; i < offered; i++) {
    const holder = i % 2 === 0 ? "a" : "b";
    if ((lease.get(holder) ?? 0) === 0 && !exhausted.has(holder)) {
      const [grant] = book.report(holder, [ask(consumed.get(holder))]);
      consumed.set(holder, 0);
      lease.set(holder, grant!.granted);
      if (grant!.exhausted) exhausted.add(holder);
    }
    if ((lease.get(holder) ?? 0) > 0) {
      lease.set(holder, lease.get(holder)! - 1);
      consumed.set(holder, consumed.get(holder)! + 1);
      admittedCount++;
    }
  }
  return admittedCount;
}

describe("QuotaLedger", () => {
  it("never leases more than the limit across data planes", () => {
    expect(admitted(ledger(20), 100)).toBe(20);
  });

  it("hands out shrinking shares: remaining over twice the data planes", () => {
    const book = ledger(20);
    expect(book.report("a", [ask()])[0]).toMatchObject({ granted: 5, exhausted: false });
    expect(book.report("b", [ask()])[0]).toMatchObject({ granted: 4 });
    expect(book.report("a", [ask(5)])[0]).toMatchObject({ granted: 3 });
  });

  it("says exhausted once nothing is left to lease, with the time to the window's end", () => {
    const clock = { now: 15_000 };
    const book = ledger(1, 1, clock);
    expect(book.report("a", [ask()])[0]).toMatchObject({ granted: 1, exhausted: false });
    expect(book.report("a", [ask(1)])[0]).toMatchObject({
      granted: 0,
      exhausted: true,
      resetsInMs: 45_000,
      window: 0,
    });
  });

  it("starts over in a new window and drops consumption reported for an old one", () => {
    const clock = { now: 0 };
    const book = ledger(2, 1, clock);
    book.report("a", [ask()]);
    expect(book.report("a", [ask(1, 0)])[0]).toMatchObject({ granted: 1, exhausted: false });
    clock.now = 60_000;
    // Two units consumed in window 0 arrive late: window 1 owes nothing for them.
    expect(book.report("a", [ask(2, 7)])[0]).toMatchObject({ window: 1, granted: 1 });
    expect(book.report("a", [ask(1, 1)])[0]).toMatchObject({ window: 1, granted: 1 });
  });

  it("gives back what a data plane held when it goes away", () => {
    const book = ledger(4, 1);
    expect(book.report("a", [ask()])[0]!.granted).toBe(2);
    expect(book.report("b", [ask()])[0]!.granted).toBe(1);
    book.release("a");
    // Without the release only 4 - 1 used - 2 held = 1 would be left.
    expect(book.report("b", [ask(1)])[0]!.granted).toBe(2);
  });

  it("debits token usage beyond the lease and refuses more once it is spent", () => {
    const book = ledger(100, 1);
    const tokens = QuotaKind.TOKENS_PER_MINUTE;
    expect(book.report("a", [ask(0, 0, true, tokens)])[0]!.granted).toBe(50);
    expect(book.report("a", [ask(130, 0, true, tokens)])[0]).toMatchObject({
      granted: 0,
      exhausted: true,
    });
  });

  it("pushes a revoked lease to every holder once token usage reaches the limit fleet-wide", () => {
    const book = ledger(100, 2);
    const tokens = QuotaKind.TOKENS_PER_MINUTE;
    const pushed = new Map<string, LeaseGrant[]>([
      ["a", []],
      ["b", []],
    ]);
    book.connect("a", (grants) => pushed.get("a")!.push(...grants));
    book.connect("b", (grants) => pushed.get("b")!.push(...grants));
    expect(book.report("a", [ask(0, 0, true, tokens)])[0]!.granted).toBe(25);
    expect(book.report("b", [ask(0, 0, true, tokens)])[0]!.granted).toBe(19);
    // b still holds 19 unspent tokens when a's usage (debited after its responses) passes 100.
    book.report("a", [ask(60, 0, false, tokens)]);
    expect(pushed.get("b")).toEqual([]);
    book.report("a", [ask(45, 0, false, tokens)]);
    const revoked = { kind: tokens, granted: 0, exhausted: true, revoked: true };
    expect(pushed.get("b")).toEqual([expect.objectContaining(revoked)]);
    expect(pushed.get("a")).toEqual([expect.objectContaining(revoked)]);
    // Told once per window, and any later ask hears the same.
    book.report("a", [ask(5, 0, false, tokens)]);
    expect(pushed.get("b")).toHaveLength(1);
    expect(book.report("b", [ask(0, 0, true, tokens)])[0]).toMatchObject(revoked);
  });

  it("tells onSpent once per window in which the budget ran out", () => {
    const clock = { now: 0 };
    const spent: string[] = [];
    const book = new QuotaLedger({
      limitOf: () => 4,
      holders: () => 1,
      now: () => clock.now,
      onSpent: (key) => spent.push(`${key.tenant} ${key.window}`),
    });
    book.report("a", [ask()]);
    book.report("a", [ask(4)]);
    expect(book.report("a", [ask(0)])[0]).toMatchObject({ exhausted: true });
    expect(spent).toEqual(["acme 0"]);
    clock.now = 60_000;
    book.report("a", [ask(0, 1)]);
    book.report("a", [ask(4, 1)]);
    expect(spent).toEqual(["acme 0", "acme 1"]);
  });

  it("does not push to a data plane that went away", () => {
    const book = ledger(10, 2);
    const pushed: LeaseGrant[] = [];
    book.connect("b", (grants) => pushed.push(...grants));
    book.report("b", [ask()]);
    book.release("b");
    book.report("a", [ask(10, 0, false)]);
    expect(pushed).toEqual([]);
  });

  it("opens a spent budget again in the same window once the snapshot raises its limit", () => {
    const limit = { value: 100 };
    const book = new QuotaLedger({ limitOf: () => limit.value, holders: () => 1, now: () => 0 });
    const tokens = QuotaKind.TOKENS_PER_MINUTE;
    book.report("a", [ask(0, 0, true, tokens)]);
    expect(book.report("a", [ask(130, 0, true, tokens)])[0]).toMatchObject({ revoked: true });
    // The same limit keeps it spent.
    expect(book.report("a", [ask(0, 0, true, tokens)])[0]).toMatchObject({ revoked: true });
    limit.value = 1000;
    const reopened = book.report("a", [ask(0, 0, true, tokens)])[0]!;
    expect(reopened).toMatchObject({ exhausted: false, revoked: false });
    expect(reopened.granted).toBeGreaterThan(0);
    // What was spent still counts: the share comes out of 1000 - 130.
    expect(reopened.granted).toBe(Math.ceil((1000 - 130) / 2));
  });

  it("keeps no budget for a tenant the snapshot does not limit (or does not hold)", () => {
    const book = new QuotaLedger({
      limitOf: (tenant) => (tenant === "acme" ? 20 : 0),
      holders: () => 1,
      now: () => 0,
    });
    for (let i = 0; i < 100; i++) {
      const entry = create(QuotaConsumptionSchema, {
        tenant: `made-up-${i}`,
        kind: RPM,
        window: 0n,
        consumed: 5n,
        wantsMore: true,
      });
      expect(book.report("a", [entry])[0]).toMatchObject({ granted: UNLIMITED_GRANT });
    }
    expect(book.budgetsHeld()).toBe(0);
    book.report("a", [ask()]);
    expect(book.budgetsHeld()).toBe(1);
  });

  it("grants an unlimited budget without counting", () => {
    const book = ledger(0);
    expect(book.report("a", [ask()])[0]).toMatchObject({ granted: UNLIMITED_GRANT });
  });
});
