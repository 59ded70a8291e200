import { type Snapshot, SnapshotSchema, toJson } from "@clawgate/proto";

/** What stands in for each secret in /config_dump. */
export const REDACTED = "[redacted]";

/**
 * The snapshot as /config_dump shows it. A tenant's API key hashes are credentials in all but
 * name (an unsalted SHA-256 of a short key can be brute-forced, and anyone who reads them can
 * tell whose key a request carried), so each is replaced; how many keys a tenant has stays
 * visible, which is what an operator debugging auth needs.
 */
export function redactedSnapshotJson(snapshot: Snapshot): ReturnType<typeof toJson> {
  const redacted = {
    ...snapshot,
    tenants: snapshot.tenants.map((tenant) => ({
      ...tenant,
      apiKeySha256: tenant.apiKeySha256.map(() => REDACTED),
    })),
  };
  return toJson(SnapshotSchema, redacted);
}
