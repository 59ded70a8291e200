import { type ResourceKind, resourceSchemas } from "@clawgate/proto";
import { z } from "zod";
import { type Caller, roleAllows } from "../auth/roles.js";

/** What a viewer reads in place of each key hash (the data plane's /config_dump says the same). */
export const REDACTED_KEY = "[redacted]";

/**
 * Whether `caller` reads tenants' key hashes as stored. A hash is a credential in all but
 * name (an unsalted SHA-256 of a key, guessable offline when keys are weak), so only the roles
 * that may write them see them; a viewer sees how many there are. No caller: an app built
 * without tokens, where every request may do everything.
 */
export function seesKeyHashes(caller: Caller | undefined): boolean {
  return caller === undefined || roleAllows(caller.role, "editor");
}

/** `spec` as `caller` may read it: a tenant's apiKeySha256 redacted for a viewer, count kept. */
export function readableSpec<T>(kind: string, spec: T, caller: Caller | undefined): T {
  if (kind !== "tenants" || seesKeyHashes(caller)) return spec;
  const keys = (spec as { apiKeySha256?: unknown }).apiKeySha256;
  if (!Array.isArray(keys)) return spec;
  return { ...spec, apiKeySha256: keys.map(() => REDACTED_KEY) };
}

/** The response shape of a resource kind's spec: a tenant's key hashes may come redacted. */
export function responseSpec(kind: ResourceKind): z.ZodType {
  if (kind !== "tenants") return resourceSchemas[kind];
  return resourceSchemas.tenants.extend({
    apiKeySha256: z
      .array(z.string())
      .describe(`SHA-256 (hex) of each API key; "${REDACTED_KEY}" each for a viewer token`),
  });
}
