import { z } from "zod";
import { resourceName } from "./field-rules.js";

export const tenantSchema = z.strictObject({
  /** SHA-256 (hex) of each API key; keys themselves are never stored. */
  apiKeySha256: z.array(z.string().regex(/^[0-9a-f]{64}$/, "must be 64 hex digits")).default([]),
  /** Requests a minute across the whole fleet, not per data plane; 0 is unlimited. */
  requestsPerMinute: z.int().min(0).default(0),
  /** Tokens a minute, fleet-wide, from the usage model responses report; 0 is unlimited. */
  tokensPerMinute: z.int().min(0).default(0),
  /** Tokens a day, fleet-wide; 0 is unlimited. */
  tokensPerDay: z.int().min(0).default(0),
  /** Routes the tenant may call; empty means all. */
  allowedRoutes: z.array(resourceName).default([]),
});

/** A tenant document with every default filled in, as stored and published. */
export type TenantDocument = z.infer<typeof tenantSchema>;
