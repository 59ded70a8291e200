import { LeaseBook, SnapshotClient } from "@clawgate/data-plane";
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
}

export function startLeaseHolder(
  teardown: Teardown,
  grpcAddress: string,
  nodeId: string,
): LeaseHolder {
  let applied = 0;
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
    onQuotaGrant: (grant) => book.grant(grant),
  });
  client.onStateChange((state) => {
    book.setConnected(state.status === "connected");
    if (state.status === "connected" && applied > 0) markReady();
  });
  teardown.add(nodeId, () => client.stop());
  client.start();
  return { book, ready };
}
