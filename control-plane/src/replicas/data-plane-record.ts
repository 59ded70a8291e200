import { z } from "zod";

/** Counts of requests a data plane answered on one version (OutcomeReport). */
export const reportedOutcomeSchema = z.object({
  version: z.int().min(0),
  requests: z.int().min(0),
  failures: z.int().min(0),
});
export type ReportedOutcome = z.infer<typeof reportedOutcomeSchema>;

export const BREAKER_STATES = ["closed", "open", "half_open"] as const;
export type BreakerStateName = (typeof BREAKER_STATES)[number];

/** One upstream's breaker as one data plane sees it (BreakerReport). */
export const reportedBreakerSchema = z.object({
  upstream: z.string(),
  state: z.enum(BREAKER_STATES),
  /** Unix milliseconds of the breaker's last transition. */
  sinceMs: z.int().min(0),
  /** Unix milliseconds the open breaker's cooldown ends; 0 unless open. */
  cooldownUntilMs: z.int().min(0),
});
export type ReportedBreaker = z.infer<typeof reportedBreakerSchema>;

/**
 * Where a data plane stands on the replica it streams from (its Hello, acks and NACKs), so an
 * SRE opening any replica sees the whole fleet. Written on change only: the last-seen time
 * moves with every report and is not shared.
 */
export const sharedDataPlaneSchema = z.object({
  hostname: z.string(),
  softwareVersion: z.string(),
  appliedVersion: z.int().min(0),
  /** Unix milliseconds its stream opened. */
  connectedAtMs: z.int().min(0),
  lastNack: z
    .object({ version: z.int().min(0), error: z.string(), atMs: z.int().min(0) })
    .optional(),
  /**
   * The version its replica publishes, null before the first: a replica that started later read
   * the store at a later revision, so versions of one config may differ between replicas and
   * the data plane is judged against the replica it streams from.
   */
  publishedVersion: z.int().min(0).nullable(),
  /** Unix milliseconds it fell behind its replica's published version; absent while caught up. */
  behindSinceMs: z.int().min(0).optional(),
});
export type SharedDataPlane = z.infer<typeof sharedDataPlaneSchema>;

/**
 * What the replica a data plane streams from knows of it beyond its health report, shared with
 * the other replicas: its request outcomes per version (progressive rollouts judge them) and its
 * breakers (the console shows them). Present in the store while the data plane is connected.
 */
export const dataPlaneRecordSchema = z.object({
  /** Unix milliseconds of the last change, so the newest of two replicas' records wins. */
  changedAtMs: z.int().min(0),
  outcomes: z.array(reportedOutcomeSchema),
  breakers: z.array(reportedBreakerSchema),
  /** Absent from a record a replica older than the fleet-wide list wrote. */
  dataPlane: sharedDataPlaneSchema.optional(),
});
export type DataPlaneRecord = z.infer<typeof dataPlaneRecordSchema>;

/** Records go under `{prefix}meta/dataplanes/{replica}/{nodeId}`, each replica its own keys. */
export function dataPlaneRecordsPrefix(prefix: string): string {
  return `${prefix}meta/dataplanes/`;
}

export function dataPlaneRecordKey(prefix: string, replica: string, nodeId: string): string {
  return `${dataPlaneRecordsPrefix(prefix)}${encodeURIComponent(replica)}/${encodeURIComponent(nodeId)}`;
}

/** The replica and data plane a key names, or undefined for a key that is not a record's. */
export function parseDataPlaneRecordKey(
  prefix: string,
  key: string,
): { replica: string; nodeId: string } | undefined {
  const base = dataPlaneRecordsPrefix(prefix);
  if (!key.startsWith(base)) return undefined;
  const parts = key.slice(base.length).split("/");
  if (parts.length !== 2 || parts[0] === "" || parts[1] === "") return undefined;
  try {
    return {
      replica: decodeURIComponent(parts[0] as string),
      nodeId: decodeURIComponent(parts[1] as string),
    };
  } catch {
    return undefined;
  }
}
