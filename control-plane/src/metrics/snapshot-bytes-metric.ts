import { Counter, type Registry } from "prom-client";

/**
 * clawgate_snapshot_bytes_sent_total: bytes of snapshot messages written to data-plane
 * streams. Divided by the number of streams it shows what one config change costs on the
 * wire, which is what a fleet's bandwidth grows with (npm run bench:scale reports it).
 * Returns the function that counts one send.
 */
export function registerSnapshotBytesMetric(registry: Registry): (bytes: number) => void {
  const sent = new Counter({
    name: "clawgate_snapshot_bytes_sent_total",
    help: "Bytes of snapshot messages written to data-plane streams (before gRPC framing and compression).",
    registers: [registry],
  });
  return (bytes) => sent.inc(bytes);
}
