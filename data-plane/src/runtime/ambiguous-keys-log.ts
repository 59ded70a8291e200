import type { Logger } from "pino";
import type { CompiledSnapshot } from "./applied-snapshot.js";

/**
 * Says, once per key index swapped in, which tenants share a key hash: that key gets 401 (it
 * names none of them, TenantKeys). A delta that changes no tenant keeps the index, so the same
 * duplicate is not logged again with every version. The hash is left out: it is a credential.
 */
export function logAmbiguousKeys(
  previous: CompiledSnapshot | undefined,
  next: CompiledSnapshot,
  logger: Pick<Logger, "warn">,
): void {
  if (previous?.tenantKeys === next.tenantKeys) return;
  for (const key of next.tenantKeys.ambiguous) {
    logger.warn(
      { version: next.version, tenants: key.tenants },
      "tenants share an API key hash: that key is refused (401) until only one holds it",
    );
  }
}
