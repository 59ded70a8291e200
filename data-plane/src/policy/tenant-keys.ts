import { createHash, timingSafeEqual } from "node:crypto";
import type { Tenant } from "@clawgate/proto";
import type { PolicyTenant } from "./policy.js";

interface KeyEntry {
  readonly digest: Buffer;
  /** Undefined: more than one tenant holds this hash, so the key names none of them. */
  readonly tenant: PolicyTenant | undefined;
}

/** A key hash more than one tenant holds (the hash itself is left out: it is a credential). */
export interface AmbiguousKey {
  /** The tenants holding it, in snapshot order. */
  readonly tenants: readonly string[];
}

/**
 * The snapshot's tenant API keys, indexed by SHA-256 once per snapshot (and rebuilt only by a
 * delta that changes a tenant): a request hashes the key it got once, finds the candidate by
 * that hash, and confirms it with a constant-time comparison. Requests reach it through the
 * snapshot they were routed by, so the auth policy compiled into a route holds no tenant data
 * and a tenant change recompiles no route.
 *
 * A hash two tenants hold (the control plane refuses one since it checks; a store written
 * before may still hold one) names neither: the key gets 401 rather than whichever tenant came
 * last, and the snapshot is still served, so one stale duplicate cannot stop every other change
 * reaching the data plane as a NACK would.
 */
export class TenantKeys {
  static readonly NONE: TenantKeys = new TenantKeys([]);

  readonly #byHash = new Map<string, KeyEntry>();
  /** Hashes held by more than one tenant; logged once by the data plane when it swaps this in. */
  readonly ambiguous: readonly AmbiguousKey[];
  /** How many tenants the index was built from (route policies compile differently with none). */
  readonly tenantCount: number;

  constructor(tenants: Iterable<Tenant>) {
    const holders = new Map<string, string[]>();
    let count = 0;
    for (const tenant of tenants) {
      count++;
      const named: PolicyTenant = Object.freeze({ name: tenant.name, source: tenant });
      for (const hex of tenant.apiKeySha256) {
        const lower = hex.toLowerCase();
        const held = holders.get(lower);
        if (held === undefined) holders.set(lower, [tenant.name]);
        else if (!held.includes(tenant.name)) held.push(tenant.name);
        const tenantOfKey = held === undefined || held.length === 1 ? named : undefined;
        this.#byHash.set(lower, { digest: Buffer.from(lower, "hex"), tenant: tenantOfKey });
      }
    }
    this.tenantCount = count;
    const ambiguous: AmbiguousKey[] = [];
    for (const names of holders.values()) {
      if (names.length > 1) ambiguous.push(Object.freeze({ tenants: Object.freeze(names) }));
    }
    this.ambiguous = Object.freeze(ambiguous);
    Object.freeze(this);
  }

  /** The tenant holding `key`, or undefined (none does, or more than one). */
  find(key: string): PolicyTenant | undefined {
    const digest = createHash("sha256").update(key, "utf8").digest();
    const entry = this.#byHash.get(digest.toString("hex"));
    if (entry === undefined || entry.digest.length !== digest.length) return undefined;
    return timingSafeEqual(entry.digest, digest) ? entry.tenant : undefined;
  }
}
