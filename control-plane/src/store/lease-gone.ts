/** True when the store refused a put because its lease is gone (embedded and etcd say it differently). */
export function isLeaseGone(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return (
    code === "CLAWGATE_STORE_LEASE_NOT_FOUND" ||
    // etcd3 wraps "requested lease not found" as "Lease ... is expired or revoked".
    (typeof message === "string" && /lease not found|expired or revoked/i.test(message))
  );
}
