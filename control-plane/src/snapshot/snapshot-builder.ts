import { randomBytes } from "node:crypto";
import {
  type ConfigProblem,
  create,
  encodeResponse,
  formatProblem,
  RESOURCE_KINDS,
  type Snapshot,
  StreamSnapshotsResponseSchema,
  validateSnapshot,
} from "@clawgate/proto";
import type { Logger } from "pino";
import { type RegistryNodes, readRegistryNodes } from "../registry/registered-node.js";
import { monotonicScheduler, type Scheduler } from "../remediation/scheduler.js";
import { applyGateKey, findGate } from "../resources/apply-gate.js";
import { type ConfigRead, readConfigState, resourceKey } from "../resources/config-state.js";
import { consistencyProblems } from "../resources/consistency.js";
import type { KeyValue, Store, Watch, WatchEvent } from "../store/store.js";
import type { SnapshotStatus, SnapshotStatusSource } from "./snapshot-status.js";
import { toSnapshot } from "./to-snapshot.js";

/** The snapshot data planes are being sent, encoded once and shared by every stream. */
export interface PublishedSnapshot {
  /** Store revision it was read at. */
  version: number;
  /** Per version, not per stream, so every stream can share `encoded`. */
  nonce: string;
  snapshot: Snapshot;
  /** A whole StreamSnapshotsResponse carrying `snapshot`, ready to write to a stream. */
  encoded: Uint8Array;
}

export type PublishListener = (published: PublishedSnapshot) => void;
export type StatusListener = (status: SnapshotStatus) => void;

type Problem = { key: string; message: string };

export type BuilderLogger = Pick<Logger, "debug" | "info" | "warn" | "error">;

export interface SnapshotBuilderOptions {
  store: Store;
  /** Key prefix the config lives under, with its trailing slash (e.g. "/clawgate/"). */
  prefix: string;
  logger: BuilderLogger;
  /** Quiet time a burst of changes gets to settle before one rebuild; default 25 ms. */
  coalesceMs?: number;
  /** Longest a change waits for its rebuild under a steady stream of writes; default 250 ms. */
  maxDelayMs?: number;
  /** Names this control plane in nonces; default a random hex id. */
  instanceId?: string;
  /** Wall clock for createdAtMs and builtAt; default Date.now. */
  clock?: () => number;
  /**
   * Clock and timers of the coalescing (coalesceMs, maxDelayMs); default the monotonic clock and
   * real timers. Tests step a ManualScheduler instead of racing the machine.
   */
  pacer?: Scheduler;
  /** First delay before re-reading and re-watching after a watch failure; default 100 ms. */
  retryMinMs?: number;
  /** Cap on that delay as failures repeat; default 5 s. */
  retryMaxMs?: number;
}

const NO_COUNTS = { routes: 0, upstreams: 0, breakers: 0, tenants: 0 };

/**
 * Turns the store into published snapshots: one range read per rebuild, versioned by that
 * read's revision, validated as a whole, encoded once. A state that fails validation is not
 * published; the previous snapshot keeps being served and status() says why.
 */
export class SnapshotBuilder implements SnapshotStatusSource {
  private readonly store: Store;
  private readonly prefix: string;
  private readonly logger: BuilderLogger;
  private readonly coalesceMs: number;
  private readonly maxDelayMs: number;
  private readonly instanceId: string;
  private readonly clock: () => number;
  private readonly retryMinMs: number;
  private readonly retryMaxMs: number;
  /** What a rebuild reads: the config kinds and the registry. */
  private readonly readPrefixes: string[];
  /** Changes that call for a rebuild: those, and the apply gate. */
  private readonly configPrefixes: string[];
  private readonly listeners = new Set<PublishListener>();
  private readonly statusListeners = new Set<StatusListener>();

  private published: PublishedSnapshot | undefined;
  private lastStatus: SnapshotStatus = {
    version: 0,
    published: false,
    publishedVersion: null,
    reason: "no config read yet",
    counts: NO_COUNTS,
  };
  /** Problems behind the last refusal, to log each distinct refusal once at warn. */
  private lastReason = "";
  /** ISO time the published snapshot was built. */
  private builtAt: string | undefined;
  /** Revision of the newest range read; everything up to it is reflected in lastStatus. */
  private readRevision = 0;
  /** True once a range read succeeded: /readyz waits for it. */
  private storeRead = false;
  /** Highest revision of a relevant change seen on the watch. */
  private wantedRevision = 0;
  private firstPendingAt: number | undefined;
  private readonly pacer: Scheduler;
  /** Cancels the pending coalesced rebuild, if one is scheduled. */
  private cancelTimer: (() => void) | undefined;
  private building = false;
  private chain: Promise<unknown> = Promise.resolve();
  private watch: Watch | undefined;
  /** Bumped per watch so a late callback from a replaced watch is recognised and dropped. */
  private watchGeneration = 0;
  private recovering = false;
  private stopped = false;
  private readonly stopSignal = new AbortController();

  constructor(options: SnapshotBuilderOptions) {
    this.store = options.store;
    this.prefix = options.prefix;
    this.logger = options.logger;
    this.coalesceMs = options.coalesceMs ?? 25;
    this.maxDelayMs = options.maxDelayMs ?? 250;
    this.instanceId = options.instanceId ?? randomBytes(4).toString("hex");
    this.clock = options.clock ?? Date.now;
    this.pacer = options.pacer ?? monotonicScheduler;
    this.retryMinMs = options.retryMinMs ?? 100;
    this.retryMaxMs = options.retryMaxMs ?? 5_000;
    // Only config documents and registered nodes make a snapshot; the journal, elections and
    // the CP's own bookkeeping share the prefix but must not trigger rebuilds.
    this.readPrefixes = [...RESOURCE_KINDS, "registry"].map((area) => `${this.prefix}${area}/`);
    this.configPrefixes = [...this.readPrefixes];
    // The end of a big apply is the gate's deletion: that must trigger the rebuild it waited for.
    this.configPrefixes.push(applyGateKey(this.prefix));
    if (!(this.coalesceMs >= 0 && this.maxDelayMs >= this.coalesceMs)) {
      throw new RangeError(
        `maxDelayMs (${this.maxDelayMs}) must be at least coalesceMs (${this.coalesceMs}) and both non-negative`,
      );
    }
  }

  /** Builds the first snapshot, then follows the store; rejects if the first read fails. */
  async start(): Promise<void> {
    await this.build();
    await this.openWatch();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopSignal.abort();
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.watchGeneration++;
    const watch = this.watch;
    this.watch = undefined;
    await watch?.close().catch(() => undefined);
    await this.chain;
  }

  status(): SnapshotStatus {
    return structuredClone(this.lastStatus);
  }

  hasReadStore(): boolean {
    return this.storeRead;
  }

  current(): PublishedSnapshot | undefined {
    return this.published;
  }

  /** Calls `listener` after each publish; returns the unsubscribe function. */
  onPublish(listener: PublishListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Calls `listener` after each read of a newer revision, published or not. */
  onStatus(listener: StatusListener): () => void {
    this.statusListeners.add(listener);
    return () => {
      this.statusListeners.delete(listener);
    };
  }

  private async openWatch(): Promise<void> {
    const generation = ++this.watchGeneration;
    const watch = await this.store.watch(this.prefix, this.readRevision + 1, {
      onEvents: (events) => {
        if (generation === this.watchGeneration) this.onEvents(events);
      },
      onError: (error) => {
        if (generation === this.watchGeneration) void this.recover(error);
      },
    });
    if (generation !== this.watchGeneration) {
      // stop() or a failure replaced this watch while it was being opened.
      await watch.close();
      return;
    }
    this.watch = watch;
  }

  private onEvents(events: WatchEvent[]): void {
    for (const event of events) {
      if (!this.configPrefixes.some((prefix) => event.key.startsWith(prefix))) continue;
      this.wantedRevision = Math.max(this.wantedRevision, event.modRevision);
    }
    // Events the last read already covered need no rebuild.
    if (this.wantedRevision > this.readRevision) this.schedule();
  }

  /** Debounces rebuilds by coalesceMs, but never past maxDelayMs after the first pending change. */
  private schedule(): void {
    if (this.stopped) return;
    const now = this.pacer.now();
    this.firstPendingAt ??= now;
    const due = Math.min(now + this.coalesceMs, this.firstPendingAt + this.maxDelayMs);
    this.cancelTimer?.();
    this.cancelTimer = this.pacer.after(Math.max(0, due - now), () => this.flush());
  }

  private flush(): void {
    this.cancelTimer = undefined;
    // A rebuild in flight re-checks wantedRevision when it ends.
    if (this.building || this.stopped) return;
    this.firstPendingAt = undefined;
    this.building = true;
    this.build()
      .catch((error: unknown) => this.recover(error))
      .finally(() => {
        this.building = false;
        if (this.wantedRevision > this.readRevision) this.schedule();
      });
  }

  /** Rebuilds are serialised: a recovery read never overlaps a coalesced one. */
  private build(): Promise<void> {
    const run = this.chain.then(() => this.rebuild());
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async rebuild(): Promise<void> {
    if (this.stopped) return;
    // While a big apply holds the gate, the config keys hold part of it: publish nothing, and
    // skip the full read too, checking only the gate, until its deletion triggers a rebuild.
    const gateKey = applyGateKey(this.prefix);
    const gate = await this.store.range(gateKey);
    if (this.applyInProgress(gate.items, gate.revision)) return;
    // Only the config kinds and the registry: the journal and health reports share the prefix
    // but are not part of a snapshot, and can be far bigger than the config.
    const range = await this.store.range([gateKey, ...this.readPrefixes]);
    if (this.applyInProgress(range.items, range.revision)) return;
    const first = !this.storeRead;
    this.storeRead = true;
    // Equal means nothing changed; lower would be a lagging replica's answer. The first read is
    // always judged: an empty config is a valid snapshot that data planes must be sent.
    if (!first && range.revision <= this.readRevision) return;
    this.readRevision = range.revision;
    const read = readConfigState(this.prefix, range);
    // Registered nodes come from the same read, so a snapshot never mixes two revisions.
    const registry = readRegistryNodes(this.prefix, range.items);
    if (registry.invalid.length > 0) {
      // A broken registration is that node's problem, not a reason to hold back the config.
      this.logger.debug({ invalid: registry.invalid }, "registry entries skipped");
    }
    const counts = {
      routes: read.state.routes.size,
      upstreams: read.state.upstreams.size,
      breakers: read.state.breakers.size,
      tenants: read.state.tenants.size,
    };
    const problems = this.problemsOf(read);
    const candidate = problems.length === 0 ? this.prepare(read, registry.nodes) : undefined;
    if (candidate === undefined) this.refuse(read.revision, problems, counts);
    else if ("problems" in candidate) this.refuse(read.revision, candidate.problems, counts);
    else this.publish(candidate, counts);
    for (const listener of this.statusListeners) {
      try {
        listener(this.status());
      } catch (error) {
        this.logger.error({ err: error }, "snapshot status listener failed");
      }
    }
  }

  /** True (and logged) when `items` hold an apply gate: nothing read now may be published. */
  private applyInProgress(items: readonly KeyValue[], revision: number): boolean {
    const gate = findGate(this.prefix, items);
    if (gate === undefined) return false;
    // Remembered as read so later batches of the apply only re-check the gate.
    this.readRevision = Math.max(this.readRevision, revision);
    this.logger.debug({ apply: gate.id, revision }, "apply in progress; snapshot not rebuilt");
    return true;
  }

  private problemsOf(read: ConfigRead): { key: string; message: string }[] {
    const invalid = read.invalid.map(({ key, reason }) => ({
      key,
      message: `invalid document: ${reason}`,
    }));
    const broken = consistencyProblems(read.state).map((problem) => ({
      key: resourceKey(this.prefix, problem.kind, problem.name),
      message: problem.message,
    }));
    return [...invalid, ...broken];
  }

  private refuse(
    version: number,
    problems: { key: string; message: string }[],
    counts: SnapshotStatus["counts"],
  ): void {
    const served = this.published?.version;
    const reason =
      `config at revision ${version} has ${problems.length} problem${problems.length === 1 ? "" : "s"}` +
      (served === undefined ? "; nothing published yet" : `; still serving version ${served}`);
    this.lastStatus = {
      version,
      published: false,
      publishedVersion: served ?? null,
      reason,
      problems,
      counts,
    };
    if (this.lastStatus.publishedVersion !== null && this.builtAt !== undefined) {
      this.lastStatus.builtAt = this.builtAt;
    }
    // The same problems on every unrelated write would flood the log; say it once per change.
    const signature = JSON.stringify(problems);
    const fields = { version, publishedVersion: served ?? null, problems };
    if (signature === this.lastReason)
      this.logger.debug(fields, `snapshot not published: ${reason}`);
    else this.logger.warn(fields, `snapshot not published: ${reason}`);
    this.lastReason = signature;
  }

  /**
   * Builds the snapshot, checks it with the shared validation a data plane runs on it (config
   * the document checks cannot see, such as registered nodes or the clock, would otherwise be
   * refused by every data plane), and only then encodes it, once.
   */
  private prepare(
    read: ConfigRead,
    registry: RegistryNodes,
  ): { published: PublishedSnapshot; builtAtMs: number } | { problems: Problem[] } {
    const version = read.revision;
    const nonce = `${this.instanceId}-${version}`;
    const now = this.clock();
    const snapshot = toSnapshot(read.state, { version, nonce, createdAtMs: now }, registry);
    const problems = validateSnapshot(snapshot);
    if (problems.length > 0) {
      return { problems: problems.map((problem) => this.keyed(problem)) };
    }
    const encoded = encodeResponse(
      create(StreamSnapshotsResponseSchema, { message: { case: "snapshot", value: snapshot } }),
    );
    return { published: { version, nonce, snapshot, encoded }, builtAtMs: now };
  }

  /** A problem under the key of the document it names; the config prefix for the snapshot. */
  private keyed(problem: ConfigProblem): Problem {
    const key =
      problem.kind === "snapshot" || problem.name === ""
        ? this.prefix
        : resourceKey(this.prefix, problem.kind, problem.name);
    return { key, message: `data planes would refuse the snapshot: ${formatProblem(problem)}` };
  }

  private publish(
    candidate: { published: PublishedSnapshot; builtAtMs: number },
    counts: SnapshotStatus["counts"],
  ): void {
    const { published, builtAtMs: now } = candidate;
    const { version, encoded } = published;
    this.published = published;
    this.builtAt = new Date(now).toISOString();
    this.lastStatus = {
      version,
      published: true,
      publishedVersion: version,
      builtAt: this.builtAt,
      counts,
    };
    if (this.lastReason !== "") {
      this.logger.info({ version }, "config is consistent again; snapshot published");
    }
    this.lastReason = "";
    this.logger.debug({ version, bytes: encoded.byteLength, ...counts }, "snapshot published");
    for (const listener of this.listeners) {
      try {
        listener(published);
      } catch (error) {
        this.logger.error({ err: error, version }, "snapshot publish listener failed");
      }
    }
  }

  /**
   * A watch that fails (history compacted, etcd restarted) may have missed changes, so the
   * state is read again in full and the watch reopened from that read, with growing backoff
   * while the store stays unreachable.
   */
  private async recover(error: unknown): Promise<void> {
    if (this.recovering || this.stopped) return;
    this.recovering = true;
    this.logger.warn({ err: error }, "config watch failed; re-reading the store and re-watching");
    this.watchGeneration++;
    const old = this.watch;
    this.watch = undefined;
    await old?.close().catch(() => undefined);
    let delay = this.retryMinMs;
    try {
      while (!this.stopped) {
        // Jitter keeps several control planes from retrying a recovering etcd in step.
        await this.sleep(delay * (0.5 + Math.random() / 2));
        if (this.stopped) return;
        try {
          await this.build();
          await this.openWatch();
          this.logger.info({ revision: this.readRevision }, "config watch re-established");
          return;
        } catch (retryError) {
          this.logger.warn(
            { err: retryError, retryInMs: Math.min(delay * 2, this.retryMaxMs) },
            "store still unavailable",
          );
          delay = Math.min(delay * 2, this.retryMaxMs);
        }
      }
    } finally {
      this.recovering = false;
    }
  }

  private sleep(ms: number): Promise<void> {
    const signal = this.stopSignal.signal;
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener("abort", done);
    });
  }
}
