import { createHash, timingSafeEqual } from "node:crypto";
import type { Tenant } from "@clawgate/proto";
import type { PolicyTenant } from "./policy.js";

interface KeyEntry {
  readonly digest: Buffer;
  readonly tenant: PolicyTenant;
}

/** One index per tenants map (one per snapshot, or per delta that changes tenants). */
const indexes = new WeakMap<ReadonlyMap<string, Tenant>, TenantKeys>();

/**
 * The tenants' API keys, indexed by SHA-256 at compile time: a request hashes the key it got
 * once, finds the candidate by that hash, and confirms it with a constant-time comparison.
 */
export class TenantKeys {
  readonly #byHash = new Map<string, KeyEntry>();

  static of(tenants: ReadonlyMap<string, Tenant>): TenantKeys {
    let keys = indexes.get(tenants);
    if (keys === undefined) {
      keys = new TenantKeys(tenants);
      indexes.set(tenants, keys);
    }
    return keys;
  }

  private constructor(tenants: ReadonlyMap<string, Tenant>) {
    for (const tenant of tenants.values()) {
      const named: PolicyTenant = Object.freeze({ name: tenant.name, source: tenant });
      for (const hex of tenant.apiKeySha256) {
        const lower = hex.toLowerCase();
        this.#byHash.set(lower, { digest: Buffer.from(lower, "hex"), tenant: named });
      }
    }
  }

  /** The tenant holding `key`, or undefined. */
  find(key: string): PolicyTenant | undefined {
    const digest = createHash("sha256").update(key, "utf8").digest();
    const entry = this.#byHash.get(digest.toString("hex"));
    if (entry === undefined || entry.digest.length !== digest.length) return undefined;
    return timingSafeEqual(entry.digest, digest) ? entry.tenant : undefined;
  }
}
