import { type QuotaGrant, QuotaKind } from "@clawgate/proto";

/** What a data plane reports of one lease (QuotaConsumption on the wire). */
export interface ConsumptionReport {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly window: bigint;
  readonly consumed: bigint;
  readonly wantsMore: boolean;
}

/**
 * A sub-share the primary of a data plane with workers lends a proxy worker out of what its own
 * book holds (QuotaLease fields, as the worker's LeaseBook.grant takes them).
 */
export interface Lent {
  readonly window: bigint;
  readonly granted: number;
  readonly resetsInMs: number;
  readonly exhausted: boolean;
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
  /** The limit of the last admit or debit (limitOf). */
  limit: number;
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
  /** The limit when it said so: a snapshot raising the limit past it lifts `exhausted`. */
  exhaustedAtLimit: number;
  /** When the unanswered ask went out; undefined when none is out. */
  askedAt: number | undefined;
  /** This window's one request on credit was let through (before its first grant). */
  credited: boolean;
  /** Requests waiting for the share asked for; settled by a grant or by its timer. */
  waiting: Waiting | undefined;
}

interface Waiting {
  readonly ready: Promise<void>;
  readonly release: () => void;
}

/** What a lease that lapsed with its stream leaves to the next stream, within its window. */
interface Carried {
  readonly tenant: string;
  readonly kind: QuotaKind;
  readonly window: bigint;
  readonly expiresAt: number;
  unreported: number;
  readonly credited: boolean;
}

/** Counts alone while no control plane is reachable: each data plane holds the whole limit. */
interface LocalWindow {
  readonly window: number;
  used: number;
  /** Date.now() time the window ends. */
  readonly endsAt: number;
}

/** `units` rounded up to a whole number in 1..most. */
function clamp(units: number, most: number): number {
  return Math.min(most, Math.max(1, Math.ceil(units)));
}

/**
 * A data plane's leases on fleet-wide tenant budgets (the control plane's QuotaLedger hands
 * them out). The request path only reads and writes local numbers: admitting a request never
 * waits for the control plane. A lease that falls below half of its last grant asks for more
 * ahead of need, so under steady traffic the next share arrives before this one is spent.
 * The first request of a window, before any share arrived, goes through on credit (and is
 * reported, so the fleet's count stays exact); every other request that finds the lease empty
 * waits for the share asked for (up to waitForGrantMs, see Admission.ready) and gets 429 with a
 * short Retry-After only if it does not come. Credit once per window, not once per ask: a
 * busy control plane whose grants lag behind the requests would otherwise let one more
 * through for every ask, past the limit. Without a control plane (the stream is down) each data
 * plane counts alone against the whole limit: limits then hold per data plane, and traffic is
 * never stopped by a control-plane outage.
 */
export class LeaseBook {
  readonly #options: LeaseBookOptions;
  readonly #leases = new Map<string, Lease>();
  readonly #local = new Map<string, LocalWindow>();
  /** What lapsed leases consumed unreported, and their credit, by lease key (setConnected). */
  readonly #carried = new Map<string, Carried>();
  #connected = false;

  constructor(options: LeaseBookOptions) {
    this.#options = options;
  }

  /**
   * The stream to a control plane opened or ended. Leases belong to a stream: they lapse. What
   * a lease consumed and had not reported yet, and whether its window's request on credit was
   * taken, outlive it (#carried): the new stream is told the consumption first, and the window
   * gets no second credit, so reconnects do not widen the overshoot past one request per data
   * plane per window.
   */
  setConnected(connected: boolean): void {
    if (connected === this.#connected) return;
    this.#connected = connected;
    // The control plane gave back what this data plane held when the stream ended; requests
    // waiting for a share go on to be admitted by what holds now.
    for (const [key, lease] of this.#leases) {
      lease.waiting?.release();
      if (lease.unreported > 0 || lease.credited) {
        const carried = this.#carried.get(key);
        this.#carried.set(key, {
          tenant: lease.tenant,
          kind: lease.kind,
          window: lease.window,
          expiresAt: lease.expiresAt,
          unreported: lease.unreported + (carried?.unreported ?? 0),
          credited: lease.credited || (carried?.credited ?? false),
        });
      }
    }
    this.#leases.clear();
    if (connected) this.#reportCarried();
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
    this.#holdTo(lease, limit);
    if (lease.balance > 0) {
      if (spend) this.#spend(lease, 1);
      return ALLOWED;
    }
    if (lease.exhausted) return { ok: false, retryAfterMs: lease.expiresAt - this.#options.now() };
    this.#ask(lease);
    // Tokens are spent after the fact anyway: until the control plane says the budget is
    // spent, a request goes on (the overshoot is what responses in flight for one round trip
    // report). A request unit is spent now, so only the window's first goes on credit.
    if (!spend) return ALLOWED;
    if (!lease.credited && lease.window === 0n) {
      lease.credited = true;
      this.#spend(lease, 1);
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
    const lease = this.#lease(tenant, kind);
    lease.limit = limit;
    this.#spend(lease, units);
  }

  /** A QuotaGrant arrived: each lease grows by its share. */
  grant(grant: QuotaGrant): void {
    const now = this.#options.now();
    for (const share of grant.leases) {
      const lease = this.#lease(share.tenant, share.kind);
      // The lease knows its window now: its own credit flag holds from here on.
      if (this.#carried.get(`${share.kind}\u0000${share.tenant}`)?.unreported === 0) {
        this.#carried.delete(`${share.kind}\u0000${share.tenant}`);
      }
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
      if (share.exhausted) lease.exhaustedAtLimit = lease.limit;
      lease.expiresAt = now + Number(share.resetsInMs);
      lease.askedAt = undefined;
      lease.waiting?.release();
    }
  }

  /**
   * The primary of a data plane with workers: moves part of what this book holds for a tenant
   * into a worker's sub-share; `size` picks how many of the `available` units (1..available).
   * Lent units leave the balance but are not consumed: the worker reports what it spends
   * (settle). Undefined when nothing is held and not yet refused: a share was asked of the
   * control plane, and the worker's ask is answered when its grant arrives. Counting alone (no
   * stream), the sub-share comes out of this data plane's own window of `limit`.
   */
  lend(
    tenant: string,
    kind: QuotaKind,
    limit: number,
    size: (available: number) => number,
  ): Lent | undefined {
    if (!this.#connected) {
      const local = this.#localWindow(tenant, kind);
      const available = limit - local.used;
      const granted = available > 0 ? clamp(size(available), available) : 0;
      local.used += granted;
      return {
        window: BigInt(local.window),
        granted,
        resetsInMs: local.endsAt - Date.now(),
        exhausted: granted === 0,
      };
    }
    const lease = this.#lease(tenant, kind);
    this.#holdTo(lease, limit);
    const resetsInMs = lease.expiresAt - this.#options.now();
    if (lease.balance > 0) {
      const granted = clamp(size(lease.balance), lease.balance);
      lease.balance -= granted;
      this.#askAhead(lease);
      return { window: lease.window, granted, resetsInMs, exhausted: false };
    }
    if (lease.exhausted) return { window: lease.window, granted: 0, resetsInMs, exhausted: true };
    this.#ask(lease);
    return undefined;
  }

  /**
   * The primary: a worker consumed `consumed` units in `window`, `beyond` of them past the
   * sub-share it was lent (a request on credit, or tokens debited after the response): all are
   * reported upstream, and those beyond come out of this book's balance. Consumption of a
   * window that lapsed is dropped, as the control plane drops it.
   */
  settle(
    tenant: string,
    kind: QuotaKind,
    window: bigint,
    consumed: number,
    beyond: number,
    limit: number,
  ): void {
    if (!this.#connected) {
      // Counting alone, lent units were counted when lent: only what went past them is new.
      const local = this.#localWindow(tenant, kind);
      if (BigInt(local.window) === window || window === 0n) local.used += beyond;
      return;
    }
    const lease = this.#lease(tenant, kind);
    if (limit > 0) lease.limit = limit;
    if (window !== 0n && lease.window !== 0n && window !== lease.window) return;
    lease.unreported += consumed;
    lease.balance -= beyond;
    this.#askAhead(lease);
  }

  /** The primary: a worker died holding `units` of its sub-share; they go back to the balance. */
  giveBack(tenant: string, kind: QuotaKind, window: bigint, units: number): void {
    if (units <= 0) return;
    if (!this.#connected) {
      const local = this.#localWindow(tenant, kind);
      if (BigInt(local.window) === window) local.used = Math.max(0, local.used - units);
      return;
    }
    const lease = this.#lease(tenant, kind);
    if (lease.window === window) lease.balance += units;
  }

  /**
   * The limit a tenant's lease was last held to (0 before any request): a proxy worker's
   * reports carry it to the primary, which counts alone with it while no stream is open.
   */
  limitOf(tenant: string, kind: QuotaKind): number {
    return this.#leases.get(`${kind}\u0000${tenant}`)?.limit ?? 0;
  }

  /** Units this book holds now for a tenant (0 when counting alone or before a grant). */
  held(tenant: string, kind: QuotaKind): number {
    if (!this.#connected) return 0;
    return this.#leases.get(`${kind}\u0000${tenant}`)?.balance ?? 0;
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

  /**
   * Holds `lease` to the snapshot's `limit`. A spent budget whose limit the snapshot raised
   * is open again: the next request asks the control plane (which reopens it too) instead of
   * being refused until the window ends.
   */
  #holdTo(lease: Lease, limit: number): void {
    lease.limit = limit;
    // Told before any request set a limit: the first limit held is the one it was spent at.
    if (lease.exhausted && lease.exhaustedAtLimit === 0) lease.exhaustedAtLimit = limit;
    if (lease.exhausted && limit > lease.exhaustedAtLimit) {
      lease.exhausted = false;
      lease.askedAt = undefined;
    }
  }

  /** Sends what lapsed leases consumed unreported, each with its own window, first thing. */
  #reportCarried(): void {
    const now = this.#options.now();
    const reports: ConsumptionReport[] = [];
    for (const [key, carried] of this.#carried) {
      if (carried.expiresAt <= now) {
        // Its window ended: the control plane's count of it lapsed too.
        this.#carried.delete(key);
      } else if (carried.unreported > 0) {
        reports.push({
          tenant: carried.tenant,
          kind: carried.kind,
          window: carried.window,
          consumed: BigInt(carried.unreported),
          wantsMore: false,
        });
      }
    }
    if (reports.length === 0 || !this.#options.send(reports)) return;
    for (const carried of this.#carried.values()) carried.unreported = 0;
  }

  /** This window's request on credit was taken by a lease that lapsed with its stream. */
  #creditTaken(key: string): boolean {
    const carried = this.#carried.get(key);
    return carried?.credited === true && carried.expiresAt > this.#options.now();
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
    this.#askAhead(lease);
  }

  /** Asks for the next share before this one is spent, so requests rarely wait for it. */
  #askAhead(lease: Lease): void {
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
        limit: 0,
        window: 0n,
        expiresAt: Number.POSITIVE_INFINITY,
        balance: 0,
        lastGrant: 0,
        unreported: 0,
        exhausted: false,
        exhaustedAtLimit: 0,
        askedAt: undefined,
        credited: this.#creditTaken(key),
        waiting: undefined,
      };
      this.#leases.set(key, lease);
    }
    return lease;
  }

  #admitAlone(tenant: string, kind: QuotaKind, limit: number, units: number): Admission {
    const local = this.#localWindow(tenant, kind);
    if (local.used >= limit) return { ok: false, retryAfterMs: local.endsAt - Date.now() };
    local.used += units;
    return ALLOWED;
  }

  /** This data plane's own count of the current window, used while no stream is open. */
  #localWindow(tenant: string, kind: QuotaKind): LocalWindow {
    const windowMs =
      kind === QuotaKind.TOKENS_PER_DAY
        ? (this.#options.dayMs ?? 86_400_000)
        : (this.#options.minuteMs ?? 60_000);
    const window = Math.floor(Date.now() / windowMs);
    const key = `${kind}\u0000${tenant}`;
    let local = this.#local.get(key);
    if (local === undefined || local.window !== window) {
      local = { window, used: 0, endsAt: (window + 1) * windowMs };
      this.#local.set(key, local);
    }
    return local;
  }
}
