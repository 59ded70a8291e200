import { createHash } from "node:crypto";
import type { ApplyResource } from "./admin-client.js";

/** The hex SHA-256 of an API key: a tenant carries only this, never the key itself. */
export function apiKeySha256(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/**
 * A tenant for POST /v1/apply that `key` authenticates as, with `limits` beside it
 * (requestsPerMinute, tokensPerDay, ...).
 */
export function tenantResource(name: string, key: string, limits: object = {}): ApplyResource {
  return { kind: "tenant", name, spec: { apiKeySha256: [apiKeySha256(key)], ...limits } };
}
