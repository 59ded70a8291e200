import {
  create,
  type QuotaGrant,
  QuotaGrantSchema,
  type QuotaKind,
  QuotaLeaseSchema,
} from "@clawgate/proto";
import type { LeaseBook } from "./lease-book.js";
import { subShare } from "./sub-share-split.js";

/** A proxy worker's ConsumptionReport, as it reaches the primary. */
export interface WorkerConsumption {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly window: bigint;
  readonly consumed: number;
  readonly wantsMore: boolean;
  readonly limit: number;
}

export interface SubSharesOptions {
  /** The primary's book: the data plane's one set of leases from the control plane. */
  book: Pick<LeaseBook, "lend" | "settle" | "giveBack" | "held">;
  /** Workers that hear messages now (cluster worker ids). */
  workers(): readonly number[];
  /** Sends a grant of sub-shares to one worker (its LeaseBook.grant takes it). */
  send(worker: number, grant: QuotaGrant): void;
}

interface Held {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly window: bigint;
  units: number;
}

interface Parked {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly limit: number;
}

/**
 * The primary's side of fleet-wide tenant budgets with `workers` > 1. The primary keeps the
 * one LeaseBook that talks to the control plane (which sees one data plane); each worker runs
 * a LeaseBook of its own that takes this class for its control plane: it spends a sub-share
 * locally (no request waits on IPC while it has one), asks for more at half of its last one,
 * and reports what it consumed, tokens debited after a response included. Reports are booked
 * into the primary's lease and go upstream with its own reports; a sub-share comes out of what
 * the primary holds (subShare), and an ask the primary cannot answer yet waits for the control
 * plane's next grant. A lease the control plane says is exhausted, once the primary holds
 * nothing of it, is passed on to every worker as it came (granted 0), so a worker refuses
 * instead of asking, and loses whatever the control plane's lease takes away.
 */
export class SubShares {
  readonly #options: SubSharesOptions;
  /** What each worker was lent and has not reported spent, by worker, then lease key. */
  readonly #held = new Map<number, Map<string, Held>>();
  /** Asks waiting for the control plane's grant, by lease key, then worker. */
  readonly #parked = new Map<string, Map<number, Parked>>();

  constructor(options: SubSharesOptions) {
    this.#options = options;
  }

  /** A worker's reports: consumption is booked, asks are answered now or parked. */
  usage(worker: number, reports: readonly WorkerConsumption[]): void {
    const answers = [];
    for (const report of reports) {
      const key = leaseKey(report.tenant, report.kind);
      const held = this.#held.get(worker)?.get(key);
      // What the worker spent of its sub-share was counted out of the balance when lent.
      const fromShare =
        held !== undefined && held.window === report.window
          ? Math.min(held.units, report.consumed)
          : 0;
      if (held !== undefined) held.units -= fromShare;
      const { book } = this.#options;
      book.settle(
        report.tenant,
        report.kind,
        report.window,
        report.consumed,
        report.consumed - fromShare,
        report.limit,
      );
      if (!report.wantsMore) continue;
      const lent = this.#lend(worker, report);
      if (lent !== undefined) answers.push(lent);
      else this.#park(key, worker, report);
    }
    if (answers.length > 0)
      this.#options.send(worker, create(QuotaGrantSchema, { leases: answers }));
  }

  /** The control plane's grant, after the primary's book took it. */
  granted(grant: QuotaGrant): void {
    for (const lease of grant.leases) {
      const key = leaseKey(lease.tenant, lease.kind);
      const parked = this.#parked.get(key);
      if (parked !== undefined) {
        for (const [worker, ask] of parked) {
          const lent = this.#lend(worker, ask);
          if (lent === undefined) continue;
          parked.delete(worker);
          this.#options.send(worker, create(QuotaGrantSchema, { leases: [lent] }));
        }
        if (parked.size === 0) this.#parked.delete(key);
      }
      if (!lease.exhausted || this.#options.book.held(lease.tenant, lease.kind) > 0) continue;
      // Nothing left here or upstream: every worker learns it at once, and a worker's sub-share
      // goes as the control plane's lease says (a lease that takes shares away takes theirs).
      const passed = create(QuotaGrantSchema, { leases: [{ ...lease, granted: 0n }] });
      for (const worker of this.#options.workers()) {
        this.#held.get(worker)?.delete(key);
        this.#options.send(worker, passed);
      }
    }
  }

  /** A worker died: what it held and did not spend goes back to the primary's balance. */
  forget(worker: number): void {
    for (const held of this.#held.get(worker)?.values() ?? []) {
      this.#options.book.giveBack(held.tenant, held.kind, held.window, held.units);
    }
    this.#held.delete(worker);
    for (const parked of this.#parked.values()) parked.delete(worker);
  }

  /** The primary's stream opened or ended: leases of the old one lapsed, here and in workers. */
  reset(): void {
    this.#held.clear();
    this.#parked.clear();
  }

  #lend(worker: number, ask: Parked) {
    const { book, workers } = this.#options;
    const lent = book.lend(ask.tenant, ask.kind, ask.limit, (available) =>
      subShare(available, workers().length),
    );
    if (lent === undefined) return undefined;
    const key = leaseKey(ask.tenant, ask.kind);
    let mine = this.#held.get(worker);
    if (mine === undefined) {
      mine = new Map();
      this.#held.set(worker, mine);
    }
    const held = mine.get(key);
    if (held !== undefined && held.window === lent.window) held.units += lent.granted;
    else
      mine.set(key, {
        tenant: ask.tenant,
        kind: ask.kind,
        window: lent.window,
        units: lent.granted,
      });
    return create(QuotaLeaseSchema, {
      tenant: ask.tenant,
      kind: ask.kind,
      window: lent.window,
      granted: BigInt(lent.granted),
      resetsInMs: BigInt(Math.max(0, Math.ceil(lent.resetsInMs))),
      exhausted: lent.exhausted,
    });
  }

  #park(key: string, worker: number, ask: Parked): void {
    let parked = this.#parked.get(key);
    if (parked === undefined) {
      parked = new Map();
      this.#parked.set(key, parked);
    }
    parked.set(worker, { tenant: ask.tenant, kind: ask.kind, limit: ask.limit });
  }
}

function leaseKey(tenant: string, kind: QuotaKind): string {
  return `${kind}\u0000${tenant}`;
}
