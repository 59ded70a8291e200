import { type QuotaConsumption, QuotaKind } from "@clawgate/proto";
import {
  type Claim,
  LocalWindowCounter,
  type WindowCounter,
  type WindowKey,
} from "./window-counter.js";

/**
 * Fleet-wide tenant budgets, kept by the control plane and spent by the data planes.
 *
 * The data planes never ask per request: each holds a lease, a share of a tenant's budget in
 * the current window, and spends it locally. When a lease runs low the data plane reports what
 * it consumed and asks for more; the ledger hands out a fraction of what is neither used nor
 * leased to someone else (remaining / (2 x data planes)), so shares shrink as the window fills
 * and no data plane can hold much that another needs.
 *
 * What the ledger hands out comes from blocks it reserved of the fleet's count of the window
 * (a WindowCounter): with several control-plane replicas, each reserves blocks from a counter in
 * etcd and leases its data planes shares of its own blocks; alone (the embedded store), its one
 * block is the whole limit. Reservations never exceed the limit, so the fleet admits at most the
 * limit, plus the one request each data plane may take on credit in a window, before its first
 * share arrives (see the data plane's LeaseBook). Token leases are spent after the fact (a response's usage is known
 * when it ends), so a lease may go negative. Consumption beyond a replica's reservation is
 * charged to the fleet's count as well, so the count is always at least what the fleet consumed:
 * the overshoot past the limit is exactly those charges, bounded by the credit requests and the
 * token usage of responses in flight when the budget ran out.
 *
 * Once the fleet's count reaches the limit and this replica's reservation is spent (or another
 * replica overshot), every data plane holding a lease of that budget here is told at once (a
 * revoked lease, pushed unasked): one still holding an unspent share would otherwise go on
 * admitting it, never asking again, while others spent the whole budget.
 */
export interface QuotaLedgerOptions {
  /** The tenant's limit for `kind` in the published config; 0 is unlimited. */
  limitOf(tenant: string, kind: QuotaKind): number;
  /** Data planes sharing the budgets (connected streams); at least 1 is assumed. */
  holders(): number;
  /** Wall-clock milliseconds: windows are aligned to the epoch so every replica agrees. */
  now(): number;
  /** Window of requestsPerMinute and tokensPerMinute; default 60 s. */
  minuteMs?: number;
  /** Window of tokensPerDay; default 24 h. */
  dayMs?: number;
  /** The fleet's count of each window; default a LocalWindowCounter (this replica alone). */
  counter?: WindowCounter;
  /** Told when the shared count could not be read or written; default nothing. */
  onError?(error: unknown, key: WindowKey): void;
  /**
   * After the shared count refused a reservation, asks of that budget are answered with what
   * is on hand (no share, if nothing is) for this long before the store is tried again;
   * default 1000 ms.
   */
  reserveRetryMs?: number;
  /**
   * Told once per window when a tenant's budget is spent fleet-wide and this replica revokes
   * the shares it handed out; default nothing.
   */
  onSpent?(key: WindowKey): void;
}

/** One lease handed out, as it goes on the wire in a QuotaGrant. */
export interface LeaseGrant {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly window: number;
  readonly granted: number;
  readonly resetsInMs: number;
  readonly exhausted: boolean;
  /** The budget was spent fleet-wide: the holder drops what is left of its lease. */
  readonly revoked?: boolean;
}

/** Sends grants to one data plane unasked (a revoked lease); see QuotaLedger.connect. */
export type GrantDelivery = (grants: readonly LeaseGrant[]) => void;

/** What an unlimited budget grants: more than any data plane spends in a window. */
export const UNLIMITED_GRANT = 1_000_000_000;

interface Budget {
  readonly key: WindowKey;
  /** Units the data planes reported consumed in the window. */
  used: number;
  /** Units leased and not yet reported consumed, by data plane. */
  readonly leases: Map<string, number>;
  /** Units of the fleet's count this replica holds: its blocks, and consumption beyond them. */
  reserved: number;
  /** The fleet's count of the window as last known (this replica's claims, the counter's news). */
  fleetTotal: number;
  /** A block is being reserved; the holders in `waiting` are answered when it comes. */
  reserving: boolean;
  readonly waiting: Set<string>;
  /** options.now() before which no block is reserved: the last reservation failed. */
  reserveAgainAt: number;
  /** The budget is spent and its holders were told so. */
  revoked: boolean;
  /** The limit it was spent at: a snapshot that raises the limit past it opens it again. */
  revokedAtLimit: number;
}

export class QuotaLedger {
  readonly #options: QuotaLedgerOptions;
  readonly #minuteMs: number;
  readonly #dayMs: number;
  readonly #reserveRetryMs: number;
  readonly #budgets = new Map<string, Budget>();
  readonly #deliveries = new Map<string, GrantDelivery>();
  readonly #counter: WindowCounter;
  readonly #unsubscribe: () => void;

  constructor(options: QuotaLedgerOptions) {
    this.#options = options;
    this.#minuteMs = options.minuteMs ?? 60_000;
    this.#dayMs = options.dayMs ?? 86_400_000;
    this.#reserveRetryMs = options.reserveRetryMs ?? 1_000;
    this.#counter = options.counter ?? new LocalWindowCounter();
    this.#unsubscribe =
      this.#counter.onTotal?.((key, total) => this.#fleetTotal(key, total)) ?? (() => {});
  }

  /** Tenant budgets this ledger keeps (one per limited tenant and kind); for tests. */
  budgetsHeld(): number {
    return this.#budgets.size;
  }

  /** Stops following the fleet's count. */
  close(): void {
    this.#unsubscribe();
  }

  /**
   * Books what `holder` consumed and answers every entry that wants more with a new lease.
   * Consumption of another window than the current one is dropped: that window's leases lapsed.
   */
  report(holder: string, entries: readonly QuotaConsumption[]): LeaseGrant[] {
    const grants: LeaseGrant[] = [];
    for (const entry of entries) {
      const windowMs = this.#windowMs(entry.kind);
      if (windowMs === undefined || entry.tenant === "") continue;
      const now = this.#options.now();
      const window = Math.floor(now / windowMs);
      const limit = this.#options.limitOf(entry.tenant, entry.kind);
      if (limit <= 0) {
        // Unlimited, or a name the published snapshot does not hold (a data plane may send any
        // string): no Budget is kept for it, so such names cannot grow this ledger.
        if (entry.wantsMore) {
          grants.push({
            ...key(entry),
            window,
            granted: UNLIMITED_GRANT,
            resetsInMs: (window + 1) * windowMs - now,
            exhausted: false,
          });
        }
        continue;
      }
      const budget = this.#budget(entry.tenant, entry.kind, window, windowMs);
      // The limit was raised past the one the budget was spent at: it is open again.
      if (budget.revoked && limit > budget.revokedAtLimit) budget.revoked = false;
      // Window 0 is a data plane that had no lease yet: what it took on credit counts now.
      const sameWindow = entry.window === 0n || Number(entry.window) === window;
      const consumed = sameWindow ? Number(entry.consumed) : 0;
      if (consumed > 0) {
        budget.used += consumed;
        const leased = budget.leases.get(holder) ?? 0;
        budget.leases.set(holder, Math.max(0, leased - consumed));
      }
      this.#chargeBeyondReservation(budget);
      this.#revokeIfSpent(budget, limit, holder);
      if (!entry.wantsMore) continue;
      const grant = this.#answer(holder, budget, limit);
      if (grant !== undefined) grants.push(grant);
    }
    return grants;
  }

  /** Where to push grants `holder` did not ask for (a revoked lease); until release(holder). */
  connect(holder: string, deliver: GrantDelivery): void {
    this.#deliveries.set(holder, deliver);
  }

  /**
   * A data plane went away: what it held and did not spend goes back to this replica's
   * reservation, and once no data plane here holds a lease of a budget, what this replica
   * reserved and nobody spent goes back to the fleet's count for other replicas to reserve.
   */
  release(holder: string): void {
    this.#deliveries.delete(holder);
    const now = this.#options.now();
    for (const budget of this.#budgets.values()) {
      budget.leases.delete(holder);
      budget.waiting.delete(holder);
      const current = Math.floor(now / budget.key.windowMs) === budget.key.window;
      if (!current || budget.leases.size > 0 || budget.reserving || budget.revoked) continue;
      const unspent = budget.reserved - budget.used;
      if (unspent <= 0) continue;
      budget.reserved -= unspent;
      budget.fleetTotal -= unspent;
      this.#settle(budget, this.#counter.charge(budget.key, -unspent), () => {});
    }
  }

  /**
   * The answer to an ask: a share of what this replica reserved and did not lease, after
   * reserving another block when that is spent and the fleet has some left (then undefined: the
   * answer is delivered when the block comes, unless the counter answered at once).
   */
  #answer(holder: string, budget: Budget, limit: number): LeaseGrant | undefined {
    if (budget.revoked) return this.#spent(budget);
    if (budget.reserving) {
      budget.waiting.add(holder);
      return undefined;
    }
    if (
      this.#available(budget) <= 0 &&
      budget.fleetTotal < limit &&
      this.#options.now() >= budget.reserveAgainAt
    ) {
      const claim = this.#counter.reserve(budget.key, limit);
      if (claim instanceof Promise) {
        budget.reserving = true;
        budget.waiting.add(holder);
        this.#settle(budget, claim, (settled) => {
          budget.reserving = false;
          if (settled !== undefined) this.#reserved(budget, settled);
          // The waiting are answered below with what is on hand. Were the store tried again at
          // once for them, a store that refuses at once would be asked in a loop that never
          // yields, each failure logged.
          else budget.reserveAgainAt = this.#options.now() + this.#reserveRetryMs;
          this.#revokeIfSpent(budget, limit);
          this.#answerWaiting(budget);
        });
        return undefined;
      }
      this.#reserved(budget, claim);
      this.#revokeIfSpent(budget, limit);
      if (budget.revoked) return this.#spent(budget);
    }
    const available = this.#available(budget);
    const holders = Math.max(1, this.#options.holders());
    const granted = available > 0 ? Math.max(1, Math.ceil(available / (2 * holders))) : 0;
    if (granted > 0) budget.leases.set(holder, (budget.leases.get(holder) ?? 0) + granted);
    return wire({
      ...budget.key,
      granted,
      resetsInMs: this.#resetsInMs(budget.key),
      // Nothing here and nothing left in the fleet; a failed reservation is not exhaustion.
      exhausted: granted === 0 && budget.fleetTotal >= limit,
      revoked: false,
    });
  }

  #answerWaiting(budget: Budget): void {
    const limit = this.#options.limitOf(budget.key.tenant, budget.key.kind);
    const waiting = [...budget.waiting];
    budget.waiting.clear();
    for (const holder of waiting) {
      const grant =
        limit > 0
          ? this.#answer(holder, budget, limit)
          : wire({
              ...budget.key,
              granted: UNLIMITED_GRANT,
              resetsInMs: this.#resetsInMs(budget.key),
              exhausted: false,
            });
      if (grant !== undefined) this.#deliveries.get(holder)?.([grant]);
    }
  }

  #reserved(budget: Budget, claim: Claim): void {
    budget.reserved += claim.units;
    budget.fleetTotal = Math.max(budget.fleetTotal, claim.total);
  }

  /** Consumption beyond this replica's reservation goes on the fleet's count at once. */
  #chargeBeyondReservation(budget: Budget): void {
    const beyond = budget.used - budget.reserved;
    if (beyond <= 0) return;
    budget.reserved = budget.used;
    budget.fleetTotal += beyond;
    this.#settle(budget, this.#counter.charge(budget.key, beyond), (claim) => {
      if (claim === undefined) return;
      budget.fleetTotal = Math.max(budget.fleetTotal, claim.total);
      this.#revokeIfSpent(budget, this.#options.limitOf(budget.key.tenant, budget.key.kind));
    });
  }

  /** Another replica (or this one) wrote the fleet's count of a window. */
  #fleetTotal(key: Omit<WindowKey, "windowMs">, total: number): void {
    const budget = this.#budgets.get(budgetId(key.tenant, key.kind));
    if (budget === undefined || budget.key.window !== key.window) return;
    budget.fleetTotal = total;
    this.#revokeIfSpent(budget, this.#options.limitOf(key.tenant, key.kind));
  }

  /**
   * The budget is spent when the fleet's count reached the limit and either this replica's
   * reservation is all consumed, or the count went past the limit (consumption beyond some
   * replica's reservation ate what the others still held).
   */
  #revokeIfSpent(budget: Budget, limit: number, reporter?: string): void {
    if (budget.revoked || limit <= 0 || budget.fleetTotal < limit) return;
    if (budget.used < budget.reserved && budget.fleetTotal <= limit) return;
    budget.revoked = true;
    budget.revokedAtLimit = limit;
    this.#revoke(budget, reporter);
    this.#options.onSpent?.(budget.key);
  }

  #spent(budget: Budget): LeaseGrant {
    return wire({
      ...budget.key,
      granted: 0,
      resetsInMs: this.#resetsInMs(budget.key),
      exhausted: true,
      revoked: true,
    });
  }

  /** Runs `then` with a claim now or when it settles; a failed claim is reported and undefined. */
  #settle(
    budget: Budget,
    claim: Claim | Promise<Claim>,
    then: (claim: Claim | undefined) => void,
  ): void {
    if (!(claim instanceof Promise)) {
      then(claim);
      return;
    }
    claim.then(
      (settled) => {
        // A window that ended meanwhile: its leases lapsed on the data planes too.
        if (this.#budgets.get(budgetId(budget.key.tenant, budget.key.kind)) === budget)
          then(settled);
      },
      (error: unknown) => {
        this.#options.onError?.(error, budget.key);
        if (this.#budgets.get(budgetId(budget.key.tenant, budget.key.kind)) === budget)
          then(undefined);
      },
    );
  }

  #resetsInMs(key: WindowKey): number {
    return (key.window + 1) * key.windowMs - this.#options.now();
  }

  /**
   * Tells every holder of `budget`, the reporting one included, that it is spent. Their leases
   * end here: nothing they still held counts as leased in this window.
   */
  #revoke(budget: Budget, reporter: string | undefined): void {
    const grant = this.#spent(budget);
    const holders = new Set(budget.leases.keys());
    if (reporter !== undefined) holders.add(reporter);
    for (const holder of holders) {
      budget.leases.set(holder, 0);
      this.#deliveries.get(holder)?.([grant]);
    }
  }

  /** What this replica reserved and neither consumed nor leased. */
  #available(budget: Budget): number {
    let leased = 0;
    for (const units of budget.leases.values()) leased += units;
    return budget.reserved - budget.used - leased;
  }

  #budget(tenant: string, kind: QuotaKind, window: number, windowMs: number): Budget {
    const id = budgetId(tenant, kind);
    let budget = this.#budgets.get(id);
    if (budget === undefined || budget.key.window !== window) {
      // A new window: every lease of the old one lapsed on the data planes too.
      budget = {
        key: { tenant, kind, window, windowMs },
        used: 0,
        leases: new Map(),
        reserved: 0,
        fleetTotal: 0,
        reserving: false,
        waiting: new Set(),
        reserveAgainAt: 0,
        revoked: false,
        revokedAtLimit: 0,
      };
      this.#budgets.set(id, budget);
    }
    return budget;
  }

  #windowMs(kind: QuotaKind): number | undefined {
    switch (kind) {
      case QuotaKind.REQUESTS_PER_MINUTE:
      case QuotaKind.TOKENS_PER_MINUTE:
        return this.#minuteMs;
      case QuotaKind.TOKENS_PER_DAY:
        return this.#dayMs;
      default:
        return undefined;
    }
  }
}

function key(entry: QuotaConsumption): { tenant: string; kind: QuotaKind } {
  return { tenant: entry.tenant, kind: entry.kind };
}

function budgetId(tenant: string, kind: QuotaKind): string {
  return `${kind}\u0000${tenant}`;
}

/** A grant as it goes out: the window key without its length, which the data plane knows. */
function wire(grant: LeaseGrant & { windowMs?: number }): LeaseGrant {
  const { windowMs: _, ...rest } = grant;
  return rest;
}
