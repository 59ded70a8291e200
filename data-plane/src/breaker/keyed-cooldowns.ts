import type { Clock } from "../clock/clock.js";
import { Cooldown, type GateCheck } from "./retry-after-gate.js";

const PASS: GateCheck = Object.freeze({ ok: true });

/** Past this many keys, blocking also forgets the cooldowns that ran out. */
const PRUNE_ABOVE = 1024;

/**
 * Retry-After cooldowns of the parts of one upstream (its nodes, or its tenants' traffic):
 * a 429 or 503 from a node with `retryAfterScope: node` stops that node only, one answered to a
 * tenant with `retryAfterScope: tenant` stops that tenant only (seed 004: cooldowns keyed by
 * the credential as well as the provider). While none runs, a check is one clock read.
 */
export class KeyedCooldowns {
  readonly #cooldowns = new Map<string, Cooldown>();
  #latest = Number.NEGATIVE_INFINITY;

  constructor(private readonly clock: Clock) {}

  /** Blocks `key` for `durationMs` from now; an earlier deadline never shortens a later one. */
  blockFor(key: string, durationMs: number): void {
    if (this.#cooldowns.size > PRUNE_ABOVE) this.#prune();
    let cooldown = this.#cooldowns.get(key);
    if (cooldown === undefined) {
      cooldown = new Cooldown(this.clock);
      this.#cooldowns.set(key, cooldown);
    }
    cooldown.blockFor(durationMs);
    const until = this.clock.now() + durationMs;
    if (until > this.#latest) this.#latest = until;
  }

  /** Whether any key is cooling down now. */
  active(): boolean {
    // Never blocked (the usual case): no clock read.
    return this.#latest !== Number.NEGATIVE_INFINITY && this.clock.now() < this.#latest;
  }

  check(key: string): GateCheck {
    if (!this.active()) return PASS;
    return this.#cooldowns.get(key)?.check() ?? PASS;
  }

  #prune(): void {
    for (const [key, cooldown] of this.#cooldowns) {
      if (cooldown.check().ok) this.#cooldowns.delete(key);
    }
  }
}
