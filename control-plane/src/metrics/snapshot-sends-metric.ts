import { Counter, type Registry } from "prom-client";

/**
 * clawgate_snapshot_sends_total{kind}: snapshots written to data-plane streams, "full" (whole,
 * in however many parts) or "delta". Full sends beyond one per connecting data plane mean data
 * planes fall behind, reconnect or refuse, which is what makes a change cost the whole config
 * on the wire. Returns the function that counts one send.
 */
export function registerSnapshotSendsMetric(registry: Registry): (kind: "full" | "delta") => void {
  const sends = new Counter({
    name: "clawgate_snapshot_sends_total",
    help: "Snapshots written to data-plane streams, by kind: full (whole, maybe in parts) or delta.",
    labelNames: ["kind"] as const,
    registers: [registry],
  });
  // Both series exist from the start, so a rate over them is defined before the first delta.
  sends.inc({ kind: "full" }, 0);
  sends.inc({ kind: "delta" }, 0);
  return (kind) => sends.inc({ kind });
}
