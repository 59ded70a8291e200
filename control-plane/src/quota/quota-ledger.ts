import { type QuotaConsumption, QuotaKind } from "@clawgate/proto";

/**
 * Fleet-wide tenant budgets, kept by the control plane and spent by the data planes.
 *
 * The data planes never ask per request: each holds a lease, a share of a tenant's budget in
 * the current window, and spends it locally. When a lease runs low the data plane reports what
 * it consumed and asks for more; the ledger hands out a fraction of what is neither used nor
 * leased to someone else (remaining / (2 x data planes)), so shares shrink as the window fills
 * and no data plane can hold much that another needs. The ledger never leases more than the
 * limit, so the fleet admits at most the limit, plus one request a data plane may take on
 * credit while its ask is in flight (see the data plane's LeaseBook): with N data planes the
 * error is bounded by N per window, not by traffic. Token leases are spent after the fact (a
 * response's usage is known when it ends), so a lease may go negative: the overshoot is bounded
 * by the responses in flight when the budget ran out. Once the fleet's reported consumption
 * reaches the limit, every data plane holding a lease of that budget is told at once (a revoked
 * lease, pushed unasked): one still holding an unspent share would otherwise go on admitting
 * it, never asking again, while another spent the whole budget.
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
  window: number;
  /** Units the data planes reported consumed in `window`. */
  used: number;
  /** Units leased and not yet reported consumed, by data plane. */
  readonly leases: Map<string, number>;
  /** Consumption reached the limit and the holders were told so. */
  revoked: boolean;
}

export class QuotaLedger {
  readonly #options: QuotaLedgerOptions;
  readonly #minuteMs: number;
  readonly #dayMs: number;
  readonly #budgets = new Map<string, Budget>();
  readonly #deliveries = new Map<string, GrantDelivery>();

  constructor(options: QuotaLedgerOptions) {
    this.#options = options;
    this.#minuteMs = options.minuteMs ?? 60_000;
    this.#dayMs = options.dayMs ?? 86_400_000;
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
      const budget = this.#budget(entry.tenant, entry.kind, window);
      // Window 0 is a data plane that had no lease yet: what it took on credit counts now.
      const sameWindow = entry.window === 0n || Number(entry.window) === window;
      const consumed = sameWindow ? Number(entry.consumed) : 0;
      if (consumed > 0) {
        budget.used += consumed;
        const leased = budget.leases.get(holder) ?? 0;
        budget.leases.set(holder, Math.max(0, leased - consumed));
      }
      const resetsInMs = (window + 1) * windowMs - now;
      const limit = this.#options.limitOf(entry.tenant, entry.kind);
      if (limit > 0 && budget.used >= limit && !budget.revoked) {
        budget.revoked = true;
        this.#revoke(holder, budget, { ...key(entry), window, resetsInMs });
      }
      if (!entry.wantsMore) continue;
      if (limit <= 0) {
        grants.push({
          ...key(entry),
          window,
          granted: UNLIMITED_GRANT,
          resetsInMs,
          exhausted: false,
        });
        continue;
      }
      const granted = this.#share(budget, limit);
      if (granted > 0) budget.leases.set(holder, (budget.leases.get(holder) ?? 0) + granted);
      const exhausted = this.#available(budget, limit) <= 0 && granted === 0;
      grants.push({
        ...key(entry),
        window,
        granted,
        resetsInMs,
        exhausted,
        revoked: budget.revoked,
      });
    }
    return grants;
  }

  /** Where to push grants `holder` did not ask for (a revoked lease); until release(holder). */
  connect(holder: string, deliver: GrantDelivery): void {
    this.#deliveries.set(holder, deliver);
  }

  /** A data plane went away: what it held and did not spend goes back to the fleet. */
  release(holder: string): void {
    this.#deliveries.delete(holder);
    for (const budget of this.#budgets.values()) budget.leases.delete(holder);
  }

  /**
   * Tells every holder of `budget`, the reporting one included, that it is spent. Their leases
   * end here: nothing they still held counts as leased in this window.
   */
  #revoke(
    reporter: string,
    budget: Budget,
    lease: Pick<LeaseGrant, "tenant" | "kind" | "window" | "resetsInMs">,
  ): void {
    const grant: LeaseGrant = { ...lease, granted: 0, exhausted: true, revoked: true };
    const holders = new Set([...budget.leases.keys(), reporter]);
    for (const holder of holders) {
      budget.leases.set(holder, 0);
      this.#deliveries.get(holder)?.([grant]);
    }
  }

  #share(budget: Budget, limit: number): number {
    const available = this.#available(budget, limit);
    if (available <= 0) return 0;
    const holders = Math.max(1, this.#options.holders());
    return Math.max(1, Math.ceil(available / (2 * holders)));
  }

  #available(budget: Budget, limit: number): number {
    let leased = 0;
    for (const units of budget.leases.values()) leased += units;
    return limit - budget.used - leased;
  }

  #budget(tenant: string, kind: QuotaKind, window: number): Budget {
    const id = `${kind}\u0000${tenant}`;
    let budget = this.#budgets.get(id);
    if (budget === undefined || budget.window !== window) {
      // A new window: every lease of the old one lapsed on the data planes too.
      budget = { window, used: 0, leases: new Map(), revoked: false };
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
