import { LeaseBook, SnapshotClient } from "@clawgate/data-plane";
import type { QuotaGrant, QuotaKind, QuotaLease } from "@clawgate/proto";
import type { Teardown } from "../support/index.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * A data plane's quota half, as the real binary wires it (data-plane/src/main.ts): the real
 * snapshot client streaming from a real control plane, and the LeaseBook the rate-limit and
 * token-budget policies spend, fed by QuotaGrant messages on that stream. Stopped by `teardown`.
 */
export interface LeaseHolder {
  readonly book: LeaseBook;
  /** Resolves once the stream is open and a snapshot was applied. */
  readonly ready: Promise<void>;
  /**
   * Resolves with the next lease the control plane sends that satisfies `test`, after the
   * book took it in. Call it before what should cause the lease, so none is missed.
   */
  nextLease(test: (lease: QuotaLease) => boolean): Promise<QuotaLease>;
  /** The last lease of `kind` the control plane sent (a share, or word that none is left). */
  lastLease(kind: QuotaKind): QuotaLease | undefined;
}

export function startLeaseHolder(
  teardown: Teardown,
  grpcAddress: string,
  nodeId: string,
): LeaseHolder {
  let applied = 0;
  const waiters = new Set<(grant: QuotaGrant) => void>();
  const last = new Map<QuotaKind, QuotaLease>();
  const nextLease = (test: (lease: QuotaLease) => boolean) =>
    new Promise<QuotaLease>((resolve) => {
      const waiter = (grant: QuotaGrant) => {
        const lease = grant.leases.find(test);
        if (lease === undefined) return;
        waiters.delete(waiter);
        resolve(lease);
      };
      waiters.add(waiter);
    });
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  const book: LeaseBook = new LeaseBook({
    now: () => performance.now(),
    send: (reports) => client.sendQuotaUsage(reports),
  });
  const client: SnapshotClient = new SnapshotClient({
    addresses: [grpcAddress],
    nodeId,
    hostname: `${nodeId}.local`,
    softwareVersion: "test",
    lastAppliedVersion: () => applied,
    logger: quiet,
    apply: (snapshot) => {
      applied = Number(snapshot.version);
      if (client.state().status === "connected") markReady();
      return { ok: true };
    },
    onQuotaGrant: (grant) => {
      book.grant(grant);
      for (const lease of grant.leases) last.set(lease.kind, lease);
      for (const waiter of [...waiters]) waiter(grant);
    },
  });
  client.onStateChange((state) => {
    book.setConnected(state.status === "connected");
    if (state.status === "connected" && applied > 0) markReady();
  });
  teardown.add(nodeId, () => client.stop());
  client.start();
  return { book, ready, nextLease, lastLease: (kind) => last.get(kind) };
}
