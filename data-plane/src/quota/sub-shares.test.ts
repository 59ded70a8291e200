import { setImmediate as turn } from "node:timers/promises";
import { create, QuotaGrantSchema, QuotaKind } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { type ConsumptionReport, LeaseBook } from "./lease-book.js";
import { SubShares } from "./sub-shares.js";

const RPM = QuotaKind.REQUESTS_PER_MINUTE;
const TPD = QuotaKind.TOKENS_PER_DAY;

/**
 * A primary's LeaseBook and SubShares with real worker LeaseBooks, wired as the processes are
 * (reports up, grants down), each message delivered in a later turn as IPC delivers it.
 */
function setup(workerIds = [1, 2]) {
  const clock = { now: 1_000 };
  let connected = true;
  const upstream: ConsumptionReport[] = [];
  const primary = new LeaseBook({
    now: () => clock.now,
    send: (reports) => {
      if (connected) upstream.push(...reports);
      return connected;
    },
  });
  primary.setConnected(true);
  const workers = new Map<number, LeaseBook>();
  /** Units of each sub-share lent, by worker. */
  const lent = new Map<number, number[]>();
  const shares = new SubShares({
    book: primary,
    workers: () => [...workers.keys()],
    send: (id, grant) => {
      for (const lease of grant.leases) {
        if (lease.granted > 0n) lent.set(id, [...(lent.get(id) ?? []), Number(lease.granted)]);
      }
      queueMicrotask(() => workers.get(id)?.grant(grant));
    },
  });
  for (const id of workerIds) {
    const book: LeaseBook = new LeaseBook({
      now: () => clock.now,
      send: (reports) => {
        const usage = reports.map((report) => ({
          ...report,
          consumed: Number(report.consumed),
          limit: book.limitOf(report.tenant, report.kind),
        }));
        queueMicrotask(() => shares.usage(id, usage));
        return true;
      },
    });
    book.setConnected(true);
    workers.set(id, book);
  }
  /** The control plane answers the primary's ask. */
  const grant = (
    granted: number,
    opts: { exhausted?: boolean; revoked?: boolean; kind?: QuotaKind } = {},
  ) => {
    const message = create(QuotaGrantSchema, {
      leases: [
        {
          tenant: "acme",
          kind: opts.kind ?? RPM,
          window: 7n,
          granted: BigInt(granted),
          resetsInMs: 30_000n,
          exhausted: opts.exhausted ?? false,
          revoked: opts.revoked ?? false,
        },
      ],
    });
    primary.grant(message);
    shares.granted(message);
  };
  const worker = (id: number) => workers.get(id)!;
  /** Admits one request of tenant acme (limit 20 a minute) in worker `id`, then lets IPC run. */
  const request = async (id: number) => {
    const admission = worker(id).admit("acme", RPM, 20);
    await turn();
    return admission;
  };
  /** Every report the workers and then the primary still hold goes upstream. */
  const flushAll = async () => {
    for (const book of workers.values()) book.flush();
    await turn();
    primary.flush();
  };
  const consumedUpstream = (kind = RPM) =>
    upstream.filter((r) => r.kind === kind).reduce((sum, r) => sum + Number(r.consumed), 0);
  /** The primary's stream ended: it counts alone, and tells the workers (stream-reset). */
  const disconnect = () => {
    connected = false;
    primary.setConnected(false);
    shares.reset();
    for (const book of workers.values()) {
      book.setConnected(false);
      book.setConnected(true);
    }
  };
  return {
    primary,
    shares,
    worker,
    lent,
    grant,
    request,
    flushAll,
    upstream,
    consumedUpstream,
    disconnect,
  };
}

describe("SubShares: proxy workers spending the primary's leases", () => {
  it("lends each asking worker an even part of what the primary holds, one ask upstream for both", async () => {
    const { grant, request, lent, upstream } = setup();
    // Each worker's first request goes on credit while it asks the primary, which asks upstream.
    expect((await request(1)).ok).toBe(true);
    expect((await request(2)).ok).toBe(true);
    expect(upstream.filter((r) => r.wantsMore)).toHaveLength(1);
    grant(10);
    await turn();
    // Half of 10 to the first worker, half of the 5 left (rounded up) to the second.
    expect(Object.fromEntries(lent)).toEqual({ 1: [5], 2: [3] });
  });

  it("serves a worker that runs out from the primary, reports each request upstream, and refuses once the fleet's budget is spent", async () => {
    const { grant, request, flushAll, consumedUpstream, worker } = setup([1]);
    await request(1);
    grant(20);
    await turn();
    let admitted = 1;
    let refusal: Awaited<ReturnType<typeof request>> | undefined;
    for (let i = 0; i < 40 && refusal === undefined; i++) {
      const admission = await request(1);
      if (admission.ok) admitted++;
      else refusal = admission;
    }
    // The 20 granted, and one request on credit per ask the primary could not answer yet.
    expect(admitted).toBeGreaterThanOrEqual(20);
    expect(admitted).toBeLessThanOrEqual(21);
    // The control plane has nothing left: the parked ask is answered exhausted.
    grant(0, { exhausted: true });
    await turn();
    const spent = worker(1).admit("acme", RPM, 20);
    expect(spent).toMatchObject({ ok: false, retryAfterMs: 30_000 });
    expect(spent.ok === false && spent.ready).toBeUndefined();
    await flushAll();
    expect(consumedUpstream()).toBe(admitted);
  });

  it("passes an exhausted lease to every worker once the primary holds nothing, so none takes credit", async () => {
    const { grant, request } = setup();
    await request(1);
    grant(1);
    await turn();
    // Worker 1 spent its credit and the one unit; the control plane has nothing more.
    grant(0, { exhausted: true });
    await turn();
    // Worker 2 never asked: without the lease passed on it would let one through on credit.
    expect(await request(2)).toMatchObject({ ok: false, retryAfterMs: 30_000 });
  });

  it("takes back what workers hold and have not spent when the control plane revokes the lease", async () => {
    const { primary, grant, request, worker } = setup();
    await request(1);
    await request(2);
    grant(10);
    await turn();
    // Both workers hold unspent sub-shares, and the primary the rest.
    expect(worker(1).admit("acme", RPM, 20).ok).toBe(true);
    expect(worker(2).admit("acme", RPM, 20).ok).toBe(true);
    // Spent elsewhere in the fleet: the control plane revokes every share of the window.
    grant(0, { exhausted: true, revoked: true });
    await turn();
    // (Below zero: the two first requests went on credit.)
    expect(primary.held("acme", RPM)).toBeLessThanOrEqual(0);
    expect(worker(1).admit("acme", RPM, 20)).toMatchObject({ ok: false, retryAfterMs: 30_000 });
    expect(worker(2).admit("acme", RPM, 20)).toMatchObject({ ok: false, retryAfterMs: 30_000 });
  });

  it("takes tokens a worker debited past its sub-share out of the primary's balance, and reports them all", async () => {
    const { primary, grant, worker, lent, flushAll, consumedUpstream } = setup();
    expect(worker(1).admit("acme", TPD, 100, false).ok).toBe(true);
    await turn();
    grant(100, { kind: TPD });
    await turn();
    // Lent 50 of 100 (half, for two workers).
    expect(primary.held("acme", TPD)).toBe(50);
    // The response used 80: 30 past the sub-share come out of the primary's 50, and the worker,
    // in debt, asks again: it is lent half of the 20 left.
    worker(1).debit("acme", TPD, 100, 80);
    await flushAll();
    expect(lent.get(1)).toEqual([50, 10]);
    expect(primary.held("acme", TPD)).toBe(10);
    expect(consumedUpstream(TPD)).toBe(80);
  });

  it("gives what a dead worker held back to the primary", async () => {
    const { primary, shares, grant, request } = setup();
    await request(1);
    grant(10);
    await turn();
    expect(primary.held("acme", RPM)).toBe(5);
    shares.forget(1);
    expect(primary.held("acme", RPM)).toBe(10);
  });

  it("holds the limit across its workers while counting alone (no stream)", async () => {
    const { disconnect, request } = setup();
    disconnect();
    let admitted = 0;
    for (let i = 0; i < 60; i++) if ((await request(1 + (i % 2))).ok) admitted++;
    // 20, plus at most one request on credit per worker (its first, before any sub-share).
    expect(admitted).toBeGreaterThanOrEqual(20);
    expect(admitted).toBeLessThanOrEqual(22);
  });
});
