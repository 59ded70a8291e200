import { type QuotaGrant, QuotaKind } from "@clawgate/proto";

/** What a data plane reports of one lease (QuotaConsumption on the wire). */
export interface ConsumptionReport {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly window: bigint;
  readonly consumed: bigint;
  readonly wantsMore: boolean;
}

export type Admission =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly retryAfterMs: number;
      /**
       * Set when the refusal is only that a share asked for has not arrived yet: settles when
       * it arrives (or after waitForGrantMs). A caller may wait on it once and admit again.
       */
      readonly ready?: Promise<void>;
    };

export interface LeaseBookOptions {
  /** Monotonic milliseconds (a lease lapses resets_in_ms after it arrived). */
  now(): number;
  /** Sends reports to the control plane; false when no stream is open (nothing was sent). */
  send(reports: readonly ConsumptionReport[]): boolean;
  /** An ask unanswered this long may be sent again (the stream was lost); default 1 s. */
  askTimeoutMs?: number;
  /** Retry-After while waiting for a share the control plane has not answered yet; default 1 s. */
  waitRetryAfterMs?: number;
  /**
   * How long a request may wait for a share asked for before it is refused: the first
   * requests after a start or a window reset then wait for their lease instead of getting 429;
   * default 500 ms.
   */
  waitForGrantMs?: number;
  /** Window of per-minute budgets when counting alone (no control plane); default 60 s. */
  minuteMs?: number;
  /** Window of per-day budgets when counting alone; default 24 h. */
  dayMs?: number;
}

const ALLOWED: Admission = Object.freeze({ ok: true });

interface Lease {
  readonly tenant: string;
  readonly kind: QuotaKind;
  /** The control plane's window number; 0 before the first grant. */
  window: bigint;
  /** When the window ends and the lease lapses (options.now clock); Infinity before a grant. */
  expiresAt: number;
  /** Units left; negative after tokens beyond the lease, or a request taken on credit. */
  balance: number;
  /** Size of the last grant: asking again starts below half of it. */
  lastGrant: number;
  /** Consumed since the last report. */
  unreported: number;
  /** The control plane has nothing left this window. */
  exhausted: boolean;
  /** When the unanswered ask went out; undefined when none is out. */
  askedAt: number | undefined;
  /** One request was let through on credit since the last grant. */
  credited: boolean;
  /** Requests waiting for the share asked for; settled by a grant or by its timer. */
  waiting: Waiting | undefined;
}

interface Waiting {
  readonly ready: Promise<void>;
  readonly release: () => void;
}

/** Counts alone while no control plane is reachable: each data plane holds the whole limit. */
interface LocalWindow {
  window: number;
  used: number;
}

/**
 * A data plane's leases on fleet-wide tenant budgets (the control plane's QuotaLedger hands
 * them out). The request path only reads and writes local numbers: admitting a request never
 * waits for the control plane. A lease that falls below half of its last grant asks for more
 * ahead of need, so under steady traffic the next share arrives before this one is spent.
 * A request that finds no lease while an ask is out goes through on credit, once per ask (and
 * is reported, so the fleet's count stays exact); the next ones wait for the share (up to
 * waitForGrantMs, see Admission.ready) and get 429 with a short Retry-After only if it does
 * not come. Without a control plane (the stream is down) each data
 * plane counts alone against the whole limit: limits then hold per data plane, and traffic is
 * never stopped by a control-plane outage.
 */
export class LeaseBook {
  readonly #options: LeaseBookOptions;
  readonly #leases = new Map<string, Lease>();
  readonly #local = new Map<string, LocalWindow>();
  #connected = false;

  constructor(options: LeaseBookOptions) {
    this.#options = options;
  }

  /** The stream to a control plane opened or ended. Leases belong to a stream: they lapse. */
  setConnected(connected: boolean): void {
    if (connected === this.#connected) return;
    this.#connected = connected;
    // The control plane gave back what this data plane held when the stream ended; requests
    // waiting for a share go on to be admitted by what holds now.
    for (const lease of this.#leases.values()) lease.waiting?.release();
    this.#leases.clear();
  }

  /**
   * Admits one request against `limit` (requestsPerMinute) and spends one unit of its lease.
   * Tokens: `spend` false only checks that the control plane has not said the budget is spent
   * (usage is known later, and debited then).
   */
  admit(tenant: string, kind: QuotaKind, limit: number, spend = true): Admission {
    if (limit <= 0) return ALLOWED;
    if (!this.#connected) return this.#admitAlone(tenant, kind, limit, spend ? 1 : 0);
    const lease = this.#lease(tenant, kind);
    if (lease.balance > 0) {
      if (spend) this.#spend(lease, 1);
      return ALLOWED;
    }
    if (lease.exhausted) return { ok: false, retryAfterMs: lease.expiresAt - this.#options.now() };
    this.#ask(lease);
    // Tokens are spent after the fact anyway: until the control plane says the budget is
    // spent, a request goes on (the overshoot is what responses in flight for one round trip
    // report). A request unit is spent now, so only one goes on credit per ask.
    if (!spend) return ALLOWED;
    if (!lease.credited) {
      lease.credited = true;
      if (spend) this.#spend(lease, 1);
      return ALLOWED;
    }
    const retryAfterMs = this.#options.waitRetryAfterMs ?? 1_000;
    // The share is on its way (the ask went out): the request may wait for it rather than be
    // refused while its tenant is under the limit. Not when nothing was sent (no stream).
    if (lease.askedAt === undefined) return { ok: false, retryAfterMs };
    return { ok: false, retryAfterMs, ready: this.#waitFor(lease) };
  }

  /** Debits what a response used (tokens) from the tenant's lease, after the fact. */
  debit(tenant: string, kind: QuotaKind, limit: number, units: number): void {
    if (limit <= 0 || units <= 0) return;
    if (!this.#connected) {
      this.#admitAlone(tenant, kind, limit, units);
      return;
    }
    this.#spend(this.#lease(tenant, kind), units);
  }

  /** A QuotaGrant arrived: each lease grows by its share. */
  grant(grant: QuotaGrant): void {
    const now = this.#options.now();
    for (const share of grant.leases) {
      const lease = this.#lease(share.tenant, share.kind);
      if (lease.window !== share.window) {
        // A new window: what was left or owed of the old one lapsed with it. Before the first
        // grant (window 0) the balance is what was taken on credit, counted in this window.
        if (lease.window !== 0n) lease.balance = 0;
        lease.window = share.window;
      }
      const granted = Number(share.granted);
      // The fleet spent the budget elsewhere: what is left of this share is no longer ours to
      // spend (a debt beyond it stays, it was consumed).
      if (share.revoked) lease.balance = Math.min(lease.balance, 0);
      lease.balance += granted;
      lease.lastGrant = granted;
      lease.exhausted = share.exhausted;
      lease.expiresAt = now + Number(share.resetsInMs);
      lease.askedAt = undefined;
      lease.credited = false;
      lease.waiting?.release();
    }
  }

  /** Reports everything consumed since the last report; called every few hundred ms. */
  flush(): void {
    const reports: ConsumptionReport[] = [];
    for (const lease of this.#leases.values()) {
      if (lease.unreported > 0) reports.push(this.#report(lease, false));
    }
    if (reports.length > 0 && this.#options.send(reports)) {
      for (const lease of this.#leases.values()) lease.unreported = 0;
    }
  }

  #waitFor(lease: Lease): Promise<void> {
    if (lease.waiting !== undefined) return lease.waiting.ready;
    let release = () => {};
    const ready = new Promise<void>((resolve) => {
      release = resolve;
    });
    const timer = setTimeout(() => waiting.release(), this.#options.waitForGrantMs ?? 500);
    // A wait never keeps the process alive.
    timer.unref();
    const waiting: Waiting = {
      ready,
      release: () => {
        clearTimeout(timer);
        if (lease.waiting === waiting) lease.waiting = undefined;
        release();
      },
    };
    lease.waiting = waiting;
    return ready;
  }

  #spend(lease: Lease, units: number): void {
    lease.balance -= units;
    lease.unreported += units;
    if (!lease.exhausted && lease.balance <= lease.lastGrant / 2) this.#ask(lease);
  }

  #ask(lease: Lease): void {
    const now = this.#options.now();
    if (lease.askedAt !== undefined && now - lease.askedAt < (this.#options.askTimeoutMs ?? 1_000))
      return;
    if (!this.#options.send([this.#report(lease, true)])) return;
    lease.askedAt = now;
    lease.unreported = 0;
  }

  #report(lease: Lease, wantsMore: boolean): ConsumptionReport {
    return {
      tenant: lease.tenant,
      kind: lease.kind,
      window: lease.window,
      consumed: BigInt(lease.unreported),
      wantsMore,
    };
  }

  #lease(tenant: string, kind: QuotaKind): Lease {
    const key = `${kind}\u0000${tenant}`;
    let lease = this.#leases.get(key);
    if (lease !== undefined && lease.expiresAt <= this.#options.now()) {
      // The window ended: its lease lapsed, and so did the control plane's count of it.
      lease.waiting?.release();
      this.#leases.delete(key);
      lease = undefined;
    }
    if (lease === undefined) {
      lease = {
        tenant,
        kind,
        window: 0n,
        expiresAt: Number.POSITIVE_INFINITY,
        balance: 0,
        lastGrant: 0,
        unreported: 0,
        exhausted: false,
        askedAt: undefined,
        credited: false,
        waiting: undefined,
      };
      this.#leases.set(key, lease);
    }
    return lease;
  }

  #admitAlone(tenant: string, kind: QuotaKind, limit: number, units: number): Admission {
    const windowMs =
      kind === QuotaKind.TOKENS_PER_DAY
        ? (this.#options.dayMs ?? 86_400_000)
        : (this.#options.minuteMs ?? 60_000);
    const now = Date.now();
    const window = Math.floor(now / windowMs);
    const key = `${kind}\u0000${tenant}`;
    let local = this.#local.get(key);
    if (local === undefined || local.window !== window) {
      local = { window, used: 0 };
      this.#local.set(key, local);
    }
    if (local.used >= limit) return { ok: false, retryAfterMs: (window + 1) * windowMs - now };
    local.used += units;
    return ALLOWED;
  }
}
