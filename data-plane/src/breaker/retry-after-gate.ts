import { type Clock, systemClock } from "../clock/clock.js";

export type GateCheck =
  | { readonly ok: true }
  | { readonly ok: false; readonly retryAfterMs: number };

const PASS: GateCheck = Object.freeze({ ok: true });

/**
 * One upstream's binding cooldown. The proxy holds it in the upstream's healing record, so a
 * request checks it without a lookup by name.
 */
export class Cooldown {
  #until = Number.NEGATIVE_INFINITY;

  constructor(private readonly clock: Clock) {}

  /** Blocks until `untilMs` (clock time); an earlier deadline never shortens a later one. */
  block(untilMs: number): void {
    if (untilMs > this.#until) this.#until = untilMs;
  }

  /** Blocks for `durationMs` from now, e.g. the result of `parseRetryAfter`. */
  blockFor(durationMs: number): void {
    this.block(this.clock.now() + durationMs);
  }

  check(): GateCheck {
    // Most upstreams never sent a Retry-After: no clock read for them.
    if (this.#until === Number.NEGATIVE_INFINITY) return PASS;
    const left = this.#until - this.clock.now();
    return left <= 0 ? PASS : { ok: false, retryAfterMs: Math.ceil(left) };
  }
}

/**
 * Binding cooldowns an upstream asked for with 429 or 503 plus `Retry-After` (seed 004: honour it
 * even when the breaker would probe earlier). Check the gate before `CircuitBreaker.acquire`, so a
 * blocked request does not take the half-open probe slot.
 */
export class RetryAfterGate {
  private readonly cooldowns = new Map<string, Cooldown>();

  /** @param clock time source; default `systemClock`. Deadlines are in this clock's ms. */
  constructor(private readonly clock: Clock = systemClock) {}

  /** The upstream's cooldown, created on first use; kept until `retain` drops the upstream. */
  cooldown(upstream: string): Cooldown {
    let cooldown = this.cooldowns.get(upstream);
    if (cooldown === undefined) {
      cooldown = new Cooldown(this.clock);
      this.cooldowns.set(upstream, cooldown);
    }
    return cooldown;
  }

  /** Blocks the upstream until `untilMs` (clock time); an earlier deadline never shortens a later one. */
  block(upstream: string, untilMs: number): void {
    this.cooldown(upstream).block(untilMs);
  }

  /** Blocks the upstream for `durationMs` from now, e.g. the result of `parseRetryAfter`. */
  blockFor(upstream: string, durationMs: number): void {
    this.cooldown(upstream).blockFor(durationMs);
  }

  check(upstream: string): GateCheck {
    return this.cooldowns.get(upstream)?.check() ?? PASS;
  }

  /** Forgets one upstream's cooldown (a delta removed the upstream). */
  forget(upstream: string): void {
    this.cooldowns.delete(upstream);
  }

  /** Forgets upstreams not named; call after applying a snapshot. */
  retain(upstreamNames: Iterable<string>): void {
    const keep = new Set(upstreamNames);
    for (const upstream of this.cooldowns.keys()) {
      if (!keep.has(upstream)) this.cooldowns.delete(upstream);
    }
  }
}

/** Longest wait `parseRetryAfter` returns unless told otherwise: 1 h. */
export const MAX_RETRY_AFTER_MS = 3_600_000;

const DAYS = "(?:mon|tue|wed|thu|fri|sat|sun)";
const LONG_DAYS = "(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)";
const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const MONTH = `(${MONTHS.join("|")})`;
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";
// The three HTTP-date forms RFC 9110 (5.6.7) says a recipient must accept.
const IMF_FIXDATE = new RegExp(`^${DAYS}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, "i");
const RFC_850 = new RegExp(`^${LONG_DAYS}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`, "i");
const ASCTIME = new RegExp(`^${DAYS} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`, "i");

/**
 * Milliseconds to wait from a `Retry-After` value: delta-seconds or an HTTP-date. Undefined for a
 * missing, negative or unparseable value. A date in the past means 0; anything over `maxMs` is
 * capped, so a broken upstream cannot park traffic for a year.
 *
 * @param nowMs wall-clock epoch ms (Date.now()), which an HTTP-date is measured against.
 * @param maxMs cap on the result; default `MAX_RETRY_AFTER_MS` (1 h).
 */
export function parseRetryAfter(
  value: string | undefined,
  nowMs: number,
  maxMs = MAX_RETRY_AFTER_MS,
): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1_000, maxMs);
  const dateMs = parseHttpDate(text, nowMs);
  if (dateMs === undefined) return undefined;
  return Math.min(Math.max(0, Math.ceil(dateMs - nowMs)), maxMs);
}

function parseHttpDate(text: string, nowMs: number): number | undefined {
  let m = IMF_FIXDATE.exec(text);
  if (m) return utc(Number(m[3]), m[2]!, Number(m[1]), m[4]!, m[5]!, m[6]!);
  m = RFC_850.exec(text);
  if (m) return utc(fullYear(Number(m[3]), nowMs), m[2]!, Number(m[1]), m[4]!, m[5]!, m[6]!);
  m = ASCTIME.exec(text);
  if (m) return utc(Number(m[6]), m[1]!, Number(m[2]!.trim()), m[3]!, m[4]!, m[5]!);
  return undefined;
}

/** RFC 9110: a two-digit year more than 50 years ahead belongs to the previous century. */
function fullYear(twoDigits: number, nowMs: number): number {
  const thisYear = new Date(nowMs).getUTCFullYear();
  let year = thisYear - (thisYear % 100) + twoDigits;
  if (year > thisYear + 50) year -= 100;
  return year;
}

function utc(
  year: number,
  monthName: string,
  day: number,
  hh: string,
  mm: string,
  ss: string,
): number | undefined {
  const month = MONTHS.indexOf(monthName.toLowerCase());
  const [h, min, s] = [Number(hh), Number(mm), Number(ss)];
  if (h > 23 || min > 59 || s > 60 || day < 1) return undefined;
  // Date.UTC rolls 31 Feb over into March; a date that does not round-trip is garbage.
  const midnight = Date.UTC(year, month, day);
  if (new Date(midnight).getUTCDate() !== day) return undefined;
  return midnight + ((h * 60 + min) * 60 + s) * 1_000;
}
