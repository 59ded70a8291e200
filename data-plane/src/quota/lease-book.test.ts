import { create, QuotaGrantSchema, QuotaKind } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { type ConsumptionReport, LeaseBook } from "./lease-book.js";

const RPM = QuotaKind.REQUESTS_PER_MINUTE;
const TPM = QuotaKind.TOKENS_PER_MINUTE;

function setup() {
  const clock = { now: 1_000 };
  const sent: ConsumptionReport[][] = [];
  const book = new LeaseBook({
    now: () => clock.now,
    send: (reports) => {
      sent.push([...reports]);
      return true;
    },
  });
  book.setConnected(true);
  const grant = (
    granted: number,
    opts: { exhausted?: boolean; revoked?: boolean; window?: number; kind?: QuotaKind } = {},
  ) =>
    book.grant(
      create(QuotaGrantSchema, {
        leases: [
          {
            tenant: "acme",
            kind: opts.kind ?? RPM,
            window: BigInt(opts.window ?? 7),
            granted: BigInt(granted),
            resetsInMs: 30_000n,
            exhausted: opts.exhausted ?? false,
            revoked: opts.revoked ?? false,
          },
        ],
      }),
    );
  return { clock, sent, book, grant };
}

describe("LeaseBook", () => {
  it("carries unreported consumption and the window's credit across a stream reconnect", () => {
    const { book, sent, grant } = setup();
    expect(book.admit("acme", RPM, 20).ok).toBe(true); // on credit, asks
    grant(10);
    for (let i = 0; i < 3; i++) expect(book.admit("acme", RPM, 20).ok).toBe(true);
    sent.length = 0;
    // The stream breaks before the credit and the 3 were reported; the next opens in the window.
    book.setConnected(false);
    book.setConnected(true);
    // Reported first on the new stream, in the window they were spent in.
    expect(sent).toEqual([
      [{ tenant: "acme", kind: RPM, window: 7n, consumed: 4n, wantsMore: false }],
    ]);
    // The window's credit was taken: the next request waits for its share instead.
    const next = book.admit("acme", RPM, 20);
    expect(next.ok).toBe(false);
    expect(next.ok === false && next.ready).toBeInstanceOf(Promise);
    // Many reconnects still add no credit.
    for (let i = 0; i < 5; i++) {
      book.setConnected(false);
      book.setConnected(true);
      expect(book.admit("acme", RPM, 20).ok).toBe(false);
    }
  });

  it("gives a new window its credit again after a reconnect", () => {
    const { book, clock, grant } = setup();
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
    grant(10);
    book.setConnected(false);
    book.setConnected(true);
    clock.now += 30_000; // the window of that grant ended
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
  });

  it("asks once for a share and lets one request through on credit meanwhile", () => {
    const { book, sent } = setup();
    expect(book.admit("acme", RPM, 20)).toEqual({ ok: true });
    expect(book.admit("acme", RPM, 20)).toMatchObject({ ok: false, retryAfterMs: 1_000 });
    expect(sent).toEqual([
      [{ tenant: "acme", kind: RPM, window: 0n, consumed: 0n, wantsMore: true }],
    ]);
  });

  it("lets the requests that find no lease yet wait for the share asked for, then admits them", async () => {
    const { book, grant } = setup();
    expect(book.admit("acme", RPM, 20).ok).toBe(true); // on credit
    const waiting = [1, 2, 3].map(() => book.admit("acme", RPM, 20));
    const ready = waiting.map((admission) => (admission.ok ? undefined : admission.ready));
    expect(ready.every((promise) => promise instanceof Promise)).toBe(true);
    // One wait per lease: every request waits on the same grant.
    expect(new Set(ready).size).toBe(1);
    grant(10);
    await ready[0];
    for (let i = 0; i < 3; i++) expect(book.admit("acme", RPM, 20).ok).toBe(true);
  });

  it("ends the wait when the share does not come, and offers none when no ask could be sent", async () => {
    const book = new LeaseBook({ now: () => 0, send: () => true, waitForGrantMs: 1 });
    book.setConnected(true);
    book.admit("acme", RPM, 20);
    const admission = book.admit("acme", RPM, 20);
    expect(admission.ok).toBe(false);
    await (admission.ok ? undefined : admission.ready); // settled by its timer, not a grant
    const offline = new LeaseBook({ now: () => 0, send: () => false });
    offline.setConnected(true);
    offline.admit("acme", RPM, 20);
    const refused = offline.admit("acme", RPM, 20);
    expect(refused.ok === false && refused.ready).toBeUndefined();
  });

  it("spends a lease locally and asks again below half of it, before it is empty", () => {
    const { book, sent, grant } = setup();
    grant(4);
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
    expect(sent).toHaveLength(0);
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
    expect(sent).toEqual([
      [{ tenant: "acme", kind: RPM, window: 7n, consumed: 2n, wantsMore: true }],
    ]);
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
    // Lease spent, ask out: the next request waits for the share. Credit is only for the
    // window's first request, before any share arrived.
    const waiting = book.admit("acme", RPM, 20);
    expect(waiting.ok).toBe(false);
    expect(waiting.ok === false && waiting.ready).toBeInstanceOf(Promise);
  });

  it("admits no more than the shares plus one on credit when every grant lags a request behind", () => {
    // A busy control plane: each grant arrives after the next request found the lease empty.
    // The ledger's shares for a limit of 3 on one data plane: 2 (3 left, halved, rounded up),
    // then 1; the third ask finds the budget spent.
    const { book, grant } = setup();
    const admitted = () => (book.admit("acme", RPM, 3).ok ? 1 : 0);
    let passed = admitted(); // on credit
    grant(2);
    passed += admitted();
    passed += admitted();
    grant(1);
    passed += admitted();
    grant(0, { exhausted: true });
    passed += admitted();
    expect(passed).toBe(3);
  });

  it("answers 429 until the window ends once the fleet's budget is spent", () => {
    const { book, clock, grant } = setup();
    grant(1, { exhausted: true });
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
    clock.now += 10_000;
    expect(book.admit("acme", RPM, 20)).toEqual({ ok: false, retryAfterMs: 20_000 });
    clock.now += 20_000;
    // The window ended: the lease lapsed and a new ask goes out.
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
  });

  it("asks again in the same window once the snapshot raises a spent budget's limit", () => {
    const { book, grant, sent } = setup();
    expect(book.admit("acme", TPM, 1000, false).ok).toBe(true);
    grant(0, { kind: TPM, exhausted: true, revoked: true });
    expect(book.admit("acme", TPM, 1000, false).ok).toBe(false);
    sent.length = 0;
    // A snapshot raised the tenant's limit: the next request goes on and asks for a share.
    expect(book.admit("acme", TPM, 5000, false).ok).toBe(true);
    expect(sent).toEqual([
      [{ tenant: "acme", kind: TPM, window: 7n, consumed: 0n, wantsMore: true }],
    ]);
    grant(400, { kind: TPM });
    expect(book.held("acme", TPM)).toBe(400);
  });

  it("debits tokens after the fact and refuses while the balance is spent", () => {
    const { book, grant, sent } = setup();
    grant(100, { kind: TPM });
    expect(book.admit("acme", TPM, 1000, false).ok).toBe(true);
    book.debit("acme", TPM, 1000, 150);
    expect(sent.at(-1)).toEqual([
      { tenant: "acme", kind: TPM, window: 7n, consumed: 150n, wantsMore: true },
    ]);
    grant(0, { kind: TPM, exhausted: true });
    expect(book.admit("acme", TPM, 1000, false).ok).toBe(false);
  });

  it("drops an unspent share when the fleet revokes it, and refuses until the window ends", () => {
    const { book, clock, grant } = setup();
    grant(10);
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
    // Nine units still held: another data plane spent the whole budget meanwhile.
    grant(0, { exhausted: true, revoked: true });
    expect(book.admit("acme", RPM, 20)).toEqual({ ok: false, retryAfterMs: 30_000 });
    clock.now += 30_000;
    expect(book.admit("acme", RPM, 20).ok).toBe(true);
  });

  it("lets token-budget requests go on while a share is asked for, until the fleet says spent", () => {
    const { book, sent } = setup();
    expect(book.admit("acme", TPM, 1000, false).ok).toBe(true);
    book.debit("acme", TPM, 1000, 60);
    expect(book.admit("acme", TPM, 1000, false).ok).toBe(true);
    // One ask out, not one per request.
    expect(sent).toHaveLength(1);
  });

  it("counts alone against the whole limit without a control plane", () => {
    const { book, sent } = setup();
    book.setConnected(false);
    expect(book.admit("acme", RPM, 2).ok).toBe(true);
    expect(book.admit("acme", RPM, 2).ok).toBe(true);
    expect(book.admit("acme", RPM, 2).ok).toBe(false);
    expect(sent).toHaveLength(0);
  });

  it("reports what was consumed since the last report on flush", () => {
    const { book, grant, sent } = setup();
    grant(10);
    book.admit("acme", RPM, 20);
    book.flush();
    expect(sent).toEqual([
      [{ tenant: "acme", kind: RPM, window: 7n, consumed: 1n, wantsMore: false }],
    ]);
    book.flush();
    expect(sent).toHaveLength(1);
  });

  it("admits everything when the tenant has no limit", () => {
    const { book, sent } = setup();
    for (let i = 0; i < 5; i++) expect(book.admit("acme", RPM, 0).ok).toBe(true);
    expect(sent).toHaveLength(0);
  });
});
