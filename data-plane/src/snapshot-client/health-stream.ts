import type { NodeHealth } from "@clawgate/proto";
import type { HealthChanges } from "../health/health-change-log.js";
import type { HealthChange } from "../health/node-health.js";
import { HEALTH_NODES_PER_TURN, type HealthReportEncoder } from "./health-report-bytes.js";

/** Where a data plane's node-health reports come from (HealthRegistry). */
export interface HealthReportSource {
  /**
   * The whole view now, in one turn; with `held`, that node in the state it just left (see
   * HealthReportPacer). What changes after it is what `takeChanges` gives next.
   */
  snapshot(held?: HealthChange): readonly NodeHealth[];
  /** The whole view as it was when called, built over several turns; likewise for `takeChanges`. */
  snapshotInTurns(): Promise<readonly NodeHealth[]>;
  /** What changed since the last of these three; undefined when too much to keep. */
  takeChanges(): HealthChanges | undefined;
}

export interface HealthStreamOptions {
  source: HealthReportSource;
  encoder: HealthReportEncoder;
  /** Writes one message on the stream; false when its buffer is full (wait for onceDrain). */
  write(bytes: Uint8Array): boolean;
  onceDrain(listener: () => void): void;
  /** A report could not be built (a bug): logged, and the next report is tried as usual. */
  onError(err: unknown): void;
}

/**
 * The node-health reports of one snapshot stream. Right after the Hello the whole view goes,
 * built and encoded over several turns (20,000 nodes). After it, each report is:
 *
 * - changes-only, once the control plane's response headers said it takes them
 *   (HEALTH_CHANGES_HEADER): what changed since the previous report, taken from the registry's
 *   change log, so it costs what changed (issue 9). The log keeps every transition, so none is
 *   skipped; when it overflowed, the whole view goes again.
 * - the whole view otherwise, as before: to an older control plane, and until the headers came
 *   (an older control plane sends them only with its first message, maybe never on a stream
 *   with nothing to send). Every whole view starts the change log anew, so the first
 *   changes-only report builds on the last whole one sent.
 *
 * Reports are written in the order they were taken. While the stream cannot take more, a
 * changes-only report waits in the change log, and a whole view is replaced by the next one.
 */
export class HealthStream {
  readonly #options: HealthStreamOptions;
  #mode: "unknown" | "changes" | "whole" = "unknown";
  /** The whole view after Hello (or after the change log overflowed) is not written yet. */
  #viewPending = false;
  #blocked = false;
  /** A whole view that waits for the stream to drain (only the newest one is kept). */
  #waitingView: Uint8Array | undefined;
  /** A report was asked for while it could not be taken yet; `held` the first one's. */
  #wanted = false;
  #held: HealthChange | undefined;
  /** Writes in the order their reports were taken, whatever their encoding takes. */
  #chain: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: HealthStreamOptions) {
    this.#options = options;
  }

  /** True once the whole view went to a control plane that takes changes-only reports. */
  get changesOnly(): boolean {
    return this.#mode === "changes" && !this.#viewPending;
  }

  /** The Hello is written: the whole view follows it. */
  start(): void {
    if (!this.#closed && !this.#viewPending) this.#sendWholeView();
  }

  /** The control plane's response headers arrived: whether it takes changes-only reports. */
  headers(takesChanges: boolean): void {
    if (this.#closed || this.#mode !== "unknown") return;
    this.#mode = takesChanges ? "changes" : "whole";
  }

  /** The view changed (a node's state, or nodes added or removed): report it as this stream does. */
  request(held?: HealthChange): void {
    if (this.#closed) return;
    if (this.#viewPending || (this.#blocked && this.#mode === "changes")) {
      this.#wanted = true;
      this.#held ??= held;
      return;
    }
    const { source, encoder } = this.#options;
    if (this.#mode !== "changes") {
      // Taken now, in one turn: the view is one instant, as the pacer's held rule needs.
      const nodes = source.snapshot(held);
      this.#enqueue(
        nodes.length <= HEALTH_NODES_PER_TURN
          ? encoder.encode(nodes)
          : encoder.encodeInTurns(nodes),
      );
      return;
    }
    const changes = source.takeChanges();
    if (changes === undefined) {
      this.#sendWholeView();
      return;
    }
    const entries = changes.nodes.length + changes.removed.length;
    if (entries === 0) return;
    this.#enqueue(
      entries <= HEALTH_NODES_PER_TURN
        ? encoder.encodeChanges(changes)
        : encoder.encodeChangesInTurns(changes),
    );
  }

  /** The stream ended: nothing more is written. */
  close(): void {
    this.#closed = true;
  }

  #sendWholeView(): void {
    this.#viewPending = true;
    const { source, encoder } = this.#options;
    const bytes = source.snapshotInTurns().then((nodes) => encoder.encodeInTurns(nodes));
    this.#enqueue(bytes, () => {
      this.#viewPending = false;
      this.#resume();
    });
  }

  #enqueue(bytes: Uint8Array | Promise<Uint8Array>, written?: () => void): void {
    // A failed build must not stop the chain: the reports after it still go, in order.
    if (bytes instanceof Promise) bytes.catch(() => undefined);
    this.#chain = this.#chain
      .then(async () => {
        this.#write(await bytes);
        written?.();
      })
      .catch((err: unknown) => {
        this.#options.onError(err);
        written?.();
      });
  }

  #write(bytes: Uint8Array): void {
    if (this.#closed) return;
    if (this.#blocked && this.#mode !== "changes") {
      this.#waitingView = bytes;
      return;
    }
    if (this.#options.write(bytes) || this.#blocked) return;
    this.#blocked = true;
    this.#options.onceDrain(() => {
      this.#blocked = false;
      const view = this.#waitingView;
      this.#waitingView = undefined;
      if (view !== undefined) this.#write(view);
      this.#resume();
    });
  }

  /** A report asked for while it had to wait is taken now. */
  #resume(): void {
    if (this.#closed || !this.#wanted || this.#viewPending) return;
    if (this.#blocked && this.#mode === "changes") return;
    const held = this.#held;
    this.#wanted = false;
    this.#held = undefined;
    this.request(held);
  }
}
