import type { Notifier } from "@clawgate/runtime";
import type { SnapshotSource } from "../runtime/applied-snapshot.js";
import type { ConnectionState } from "../snapshot-client/connection-state.js";

export type { SnapshotSource };

/**
 * What the data plane tells systemd: READY=1 once its listeners are bound and a snapshot (from
 * a control plane or the cache) is applied, and a STATUS= line for every change of what it is
 * serving and from where.
 */
export class ServingStatus {
  readonly #notifier: Notifier;
  #listening = false;
  #stopping = false;
  #version = 0;
  #source: SnapshotSource | undefined;
  #connection: ConnectionState = { status: "idle" };

  constructor(notifier: Notifier) {
    this.#notifier = notifier;
  }

  /** The listeners are bound. */
  listening(): void {
    this.#listening = true;
    this.#update();
  }

  /** A snapshot is being served. */
  applied(version: number, source: SnapshotSource): void {
    this.#version = version;
    this.#source = source;
    this.#update();
  }

  connection(state: ConnectionState): void {
    this.#connection = state;
    this.#update();
  }

  stopping(): void {
    this.#stopping = true;
    this.#update();
  }

  /** The STATUS= text for the current state. */
  text(): string {
    if (this.#stopping) return "stopping: draining requests in flight";
    const connected = this.#connection.status === "connected";
    const where = describeConnection(this.#connection);
    if (this.#source === undefined) return `waiting for the control plane${where}`;
    if (this.#source === "cache") {
      return connected
        ? `serving cached version ${this.#version}; connected to the control plane${where}`
        : `serving cached version ${this.#version} while the control plane is unreachable`;
    }
    return connected
      ? `serving version ${this.#version}`
      : `serving version ${this.#version}; the control plane is unreachable, reconnecting`;
  }

  #update(): void {
    this.#notifier.status(this.text());
    if (this.#listening && this.#source !== undefined && !this.#stopping) this.#notifier.ready();
  }
}

function describeConnection(state: ConnectionState): string {
  switch (state.status) {
    case "connecting":
    case "connected":
      return ` at ${state.address}`;
    case "waiting":
      return ` (last attempt: ${state.reason}; next ${state.nextAddress})`;
    default:
      return "";
  }
}
