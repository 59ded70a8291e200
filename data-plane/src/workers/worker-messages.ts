/**
 * What the primary and its proxy workers say to each other over the cluster IPC channel.
 * Snapshots travel as their protobuf bytes (base64: the channel is JSON), so a worker decodes
 * and compiles exactly what the control plane sent.
 */
export type ToWorker =
  /** First message after fork: the snapshot served now, applied before the worker listens. */
  | { type: "clawgate:init"; snapshot: string | undefined; unusable: readonly UnusableNode[] }
  | { type: "clawgate:snapshot"; snapshot: string; version: string }
  /** A node entered or left rotation in the primary's health registry. */
  | { type: "clawgate:health"; upstream: string; address: string; usable: boolean }
  | { type: "clawgate:stop"; drainTimeoutMs: number };

export type FromWorker =
  /** Listening for messages: the primary answers with init (a message sent before is lost). */
  | { type: "clawgate:hello" }
  | { type: "clawgate:listening"; address: string }
  | { type: "clawgate:applied"; version: string; ok: boolean; reason?: string }
  /** A connection to this node was refused: the primary's health registry decides. */
  | { type: "clawgate:refused"; upstream: string; address: string };

export interface UnusableNode {
  upstream: string;
  address: string;
}

/** A message of this protocol (prom-client's own cluster messages share the channel). */
function isClawgateMessage(message: unknown): boolean {
  return (
    typeof message === "object" &&
    message !== null &&
    typeof (message as { type?: unknown }).type === "string" &&
    (message as { type: string }).type.startsWith("clawgate:")
  );
}

export const isFromWorker = isClawgateMessage as (message: unknown) => message is FromWorker;
export const isToWorker = isClawgateMessage as (message: unknown) => message is ToWorker;
