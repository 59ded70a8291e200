import cluster, { type Worker } from "node:cluster";
import {
  type Snapshot,
  type SnapshotDelta,
  SnapshotDeltaSchema,
  SnapshotSchema,
  toBinary,
} from "@clawgate/proto";
import { CLOSE_GRACE_MS } from "@clawgate/runtime";
import type { Logger } from "pino";
import { Counter, Gauge, type Registry } from "prom-client";
import { WorkerBreakers } from "../breaker/worker-breakers.js";
import type { FamilyView } from "../metrics/metrics-source.js";
import { WorkerOutcomes } from "../outcomes/worker-outcomes.js";
import type { SnapshotApplyResult } from "../snapshot-client/snapshot-client.js";
import { RestartBackoff } from "./restart-backoff.js";
import { type Participants, TwoPhaseApply } from "./two-phase-apply.js";
import { failureError, WorkerStartError } from "./worker-failure.js";
import { WorkerLiveness } from "./worker-liveness.js";
import {
  type CoordinationMessage,
  type FromWorker,
  isFromWorker,
  type ToWorker,
  type UnusableNode,
  type WorkerUpdate,
} from "./worker-messages.js";
import { WorkerMetrics } from "./worker-metrics.js";

/** Where the workers listen: the proxy, and the HTTPS proxy with proxyTlsListen. */
export interface WorkerAddresses {
  readonly proxy: string;
  readonly tls: string | undefined;
}

/** Why a worker was replaced: the label of clawgate_worker_restarts_total. */
const RESTART_REASONS = ["exited", "apply-timeout", "missed-pings", "hello-timeout"] as const;
export type RestartReason = (typeof RESTART_REASONS)[number];

/**
 * The primary's side of `workers` > 1: forks the proxy workers, applies each snapshot or delta
 * in all of them as one step (TwoPhaseApply), sends them health changes, combines their metrics,
 * and replaces a worker that dies (the cluster keeps the listening sockets meanwhile): at once
 * after a healthy run, then with a growing delay while replacements die young (RestartBackoff).
 * A worker alive but hung (it leaves pings or an apply unanswered, or never says hello) is
 * killed and replaced the same way. At boot, a worker that dies before any worker listened
 * fails start() with its reason (a ListenError when it could not bind): the data plane exits
 * rather than live on without a listener.
 */
export class WorkerPool {
  readonly #count: number;
  readonly #logger: Logger;
  readonly #onRefused: (upstream: string, address: string) => void;
  readonly #onCoordination: (worker: number, message: CoordinationMessage) => void;
  readonly #onGone: (worker: number) => void;
  /** The snapshot the primary serves now, given to every worker before it listens. */
  readonly #served: () => Snapshot | undefined;
  readonly #unusable = new Map<string, UnusableNode>();
  readonly #listening = new Set<number>();
  /**
   * Workers that said hello, so they hear messages: one still loading its code would lose a
   * message (and an apply or a scrape would wait for it); it gets the current snapshot in
   * init instead, once no apply is under way.
   */
  readonly #hearing = new Set<number>();
  readonly #applies: TwoPhaseApply;
  readonly #metrics: WorkerMetrics;
  readonly #liveness: WorkerLiveness;
  /** The workers' request outcomes per version, summed for the snapshot stream. */
  readonly outcomes = new WorkerOutcomes();
  /** The workers' breakers that are not closed, merged for the snapshot stream. */
  readonly breakers = new WorkerBreakers();
  readonly #onBreakers: () => void;
  /** Workers killed as hung, with why, until their exit is seen. */
  readonly #killed = new Map<number, RestartReason>();
  readonly #restarts: Counter<"reason">;
  #stopping = false;
  readonly #firstListening: Promise<WorkerAddresses>;
  #resolveListening!: (addresses: WorkerAddresses) => void;
  #rejectListening!: (error: Error) => void;
  /** Some worker listened: boot is over, a death from now on is replaced. */
  #listened = false;
  /** start() failed: the data plane stops, nothing is forked again. */
  #startFailed = false;
  readonly #helloTimeoutMs: number;
  /** One per worker slot: a replacement takes its predecessor's slot and its streak of deaths. */
  readonly #backoffs: RestartBackoff[];
  /** Each live worker's slot, and when it started listening. */
  readonly #slots = new Map<number, { readonly slot: number; listeningAt?: number }>();
  /** Why a worker could not serve (it said so, or never said hello), until its exit. */
  readonly #failures = new Map<number, Error>();
  readonly #helloDeadlines = new Map<number, NodeJS.Timeout>();
  /** Replacements waiting out their backoff. */
  readonly #pendingForks = new Set<NodeJS.Timeout>();

  constructor(options: {
    count: number;
    logger: Logger;
    registry: Registry;
    served: () => Snapshot | undefined;
    onRefused: (upstream: string, address: string) => void;
    /** A worker's message for the primary's leases or probe claims (see SubShares, ProbeRelay). */
    onCoordination?: (worker: number, message: CoordinationMessage) => void;
    /** A worker died: what it held of leases and probes goes back. */
    onGone?: (worker: number) => void;
    /** A worker's breakers changed, or it exited with some not closed: `breakers` moved. */
    onBreakers?: () => void;
    /** How long an apply waits for a worker's prepare or commit answer (workerApplyTimeoutMs). */
    applyTimeoutMs: number;
    /** Time between liveness pings to each worker (workerPingIntervalMs). */
    pingIntervalMs: number;
    /** Pings in a row a worker may miss before it is killed as hung (workerMaxMissedPings). */
    maxMissedPings: number;
    /** How long a forked worker may take to say hello before it is killed (workerHelloTimeoutMs). */
    helloTimeoutMs: number;
  }) {
    this.#count = options.count;
    this.#helloTimeoutMs = options.helloTimeoutMs;
    this.#backoffs = Array.from({ length: options.count }, () => new RestartBackoff());
    this.#logger = options.logger;
    this.#onRefused = options.onRefused;
    this.#served = options.served;
    this.#onCoordination = options.onCoordination ?? (() => {});
    this.#onGone = options.onGone ?? (() => {});
    this.#onBreakers = options.onBreakers ?? (() => {});
    this.#firstListening = new Promise((resolve, reject) => {
      this.#resolveListening = resolve;
      this.#rejectListening = reject;
    });
    const participants: Participants = {
      ids: () => this.#hearingWorkers().map((w) => w.id),
      send: (id, message) => {
        const worker = cluster.workers?.[id];
        if (worker !== undefined) this.#send(worker, message);
      },
    };
    this.#applies = new TwoPhaseApply(participants, {
      answerTimeoutMs: options.applyTimeoutMs,
      hung: (id, reason) => this.#killHung(id, "apply-timeout", reason),
    });
    this.#metrics = new WorkerMetrics(participants, { served: options.served });
    this.#liveness = new WorkerLiveness({
      participants,
      intervalMs: options.pingIntervalMs,
      maxMissed: options.maxMissedPings,
      hung: (id, reason) => this.#killHung(id, "missed-pings", reason),
    });
    this.#restarts = new Counter({
      name: "clawgate_worker_restarts_total",
      help: "Proxy workers replaced, by reason: exited (died on its own), apply-timeout, missed-pings or hello-timeout (hung: left an apply or pings unanswered, or never said hello).",
      labelNames: ["reason"],
      registers: [options.registry],
    });
    // Every reason from 0, so increase() sees the first restart of each.
    for (const reason of RESTART_REASONS) this.#restarts.inc({ reason }, 0);
    const pool = this;
    new Gauge({
      name: "clawgate_workers",
      help: "Proxy workers alive and listening.",
      registers: [options.registry],
      collect() {
        this.set(pool.#listening.size);
      },
    });
  }

  /**
   * Forks every worker; resolves with the proxy addresses once the first one listens, rejects
   * when one dies before any listened (with its ListenError when it could not bind).
   */
  start(): Promise<WorkerAddresses> {
    for (let slot = 0; slot < this.#count; slot++) this.#fork(slot);
    this.#liveness.start();
    // The last guard, for an exit that does not wait for stop (a second signal, the stop
    // deadline): a healthy worker exits when its channel closes, a hung one never would.
    process.once("exit", () => {
      for (const worker of this.#live()) worker.process.kill("SIGKILL");
    });
    return this.#firstListening;
  }

  /**
   * Applies a whole snapshot in every worker and, through `local`, in the primary; ok only when
   * each accepted it, and then every worker serves it (a NACK with the refusal otherwise).
   * A function is called when the apply's turn comes, for the snapshot to apply then;
   * undefined from it applies nothing and resolves undefined. After stop(), nothing is applied.
   */
  applySnapshot(
    snapshot: Snapshot | (() => Snapshot | undefined),
    local: () => Promise<SnapshotApplyResult>,
  ): Promise<SnapshotApplyResult> {
    const update = (): WorkerUpdate | undefined => {
      const whole = typeof snapshot === "function" ? snapshot() : snapshot;
      return (
        whole && {
          kind: "snapshot",
          bytes: Buffer.from(toBinary(SnapshotSchema, whole)).toString("base64"),
        }
      );
    };
    return this.#apply(update, local);
  }

  /** As applySnapshot, for a delta on the version every worker serves: only the delta travels. */
  applyDelta(
    delta: SnapshotDelta,
    local: () => Promise<SnapshotApplyResult>,
  ): Promise<SnapshotApplyResult> {
    const bytes = Buffer.from(toBinary(SnapshotDeltaSchema, delta)).toString("base64");
    return this.#apply({ kind: "delta", bytes }, local);
  }

  #apply(
    update: WorkerUpdate | (() => WorkerUpdate | undefined),
    local: () => Promise<SnapshotApplyResult>,
  ): Promise<SnapshotApplyResult> {
    if (this.#stopping) {
      // Not refused, so no NACK: the next data plane to connect gets it.
      this.#logger.info("update not applied: the data plane is stopping (its workers drain)");
      return Promise.resolve(undefined);
    }
    return this.#applies.run(update, local);
  }

  /** The workers' series combined, to render a family at a time (see WorkerMetrics). */
  metricsView(): Promise<FamilyView> {
    return this.#metrics.view();
  }

  /** A node entered or left rotation: every worker's pickers follow. */
  healthChanged(upstream: string, address: string, usable: boolean): void {
    const key = `${upstream}\u0000${address}`;
    if (usable) this.#unusable.delete(key);
    else this.#unusable.set(key, { upstream, address });
    for (const worker of this.#hearingWorkers()) {
      this.#send(worker, { type: "clawgate:health", upstream, address, usable });
    }
  }

  /** Workers that hear messages now, by cluster worker id. */
  ids(): number[] {
    return this.#hearingWorkers().map((worker) => worker.id);
  }

  /** Sends one worker a message (nothing when it is gone). */
  sendTo(id: number, message: ToWorker): void {
    const worker = cluster.workers?.[id];
    if (worker !== undefined && this.#hearing.has(id)) this.#send(worker, message);
  }

  /** Sends every worker that hears messages the same message. */
  broadcast(message: ToWorker): void {
    for (const worker of this.#hearingWorkers()) this.#send(worker, message);
  }

  /** Drains every worker (each lets its requests finish within drainTimeoutMs) and waits. */
  async stop(drainTimeoutMs: number): Promise<void> {
    this.#stopping = true;
    // A draining worker answers an apply only once it exits: none starts now (applyDelta and
    // applySnapshot resolve undefined), so none waits on a drain and counts the worker hung.
    this.#applies.stop();
    // A worker draining long requests is no hung one.
    this.#liveness.stop();
    for (const fork of this.#pendingForks) clearTimeout(fork);
    this.#pendingForks.clear();
    for (const deadline of this.#helloDeadlines.values()) clearTimeout(deadline);
    const exits = this.#live().map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (worker.isDead()) return resolve();
          // One not yet running its code has no requests to drain.
          if (!this.#hearing.has(worker.id)) {
            worker.once("exit", () => resolve());
            worker.kill();
            return;
          }
          this.#send(worker, { type: "clawgate:stop", drainTimeoutMs });
          // A hung worker neither drains nor exits, and must not outlive the data plane (it
          // would hold its connections, and under no supervisor nothing else would end it).
          // Half the close grace after its drain: before the primary's own deadline gives up.
          const late = setTimeout(
            () => {
              this.#logger.error(
                { worker: worker.id, pid: worker.process.pid, drainTimeoutMs },
                "proxy worker did not stop after its drain; killing it (SIGKILL)",
              );
              worker.process.kill("SIGKILL");
            },
            drainTimeoutMs + CLOSE_GRACE_MS / 2,
          );
          worker.once("exit", () => {
            clearTimeout(late);
            resolve();
          });
        }),
    );
    await Promise.all(exits);
  }

  #hearingWorkers(): Worker[] {
    return this.#live().filter((w) => this.#hearing.has(w.id));
  }

  #live(): Worker[] {
    return Object.values(cluster.workers ?? {}).filter(
      (w): w is Worker => w !== undefined && !w.isDead(),
    );
  }

  /**
   * A worker that is alive but does not answer (its event loop stuck) serves nobody well and
   * would hold every apply: SIGKILL, by its pid, since a hung loop cannot run a graceful
   * stop. Its exit starts the replacement, on the version the data plane then serves.
   */
  #killHung(id: number, reason: RestartReason, detail: string): void {
    const worker = cluster.workers?.[id];
    if (worker === undefined || worker.isDead() || this.#killed.has(id)) return;
    // Stopping, a worker that does not answer is most likely draining (its message queue waits
    // on the drain); stop() ends it after its drain timeout if it is truly hung.
    if (this.#stopping) return;
    this.#killed.set(id, reason);
    // It hears nothing more: no apply, scrape or ping waits for it from now on.
    this.#hearing.delete(id);
    this.#applies.gone(id);
    this.#metrics.gone(id);
    this.#liveness.gone(id);
    this.#logger.error(
      { worker: id, pid: worker.process.pid, reason: detail },
      "proxy worker hung; killing it (SIGKILL) and starting another",
    );
    worker.process.kill("SIGKILL");
  }

  #send(worker: Worker, message: ToWorker): void {
    // A worker that just died cannot take it; its exit handler settles what it owed.
    if (worker.isConnected()) worker.send(message);
  }

  #fork(slot: number): void {
    const worker = cluster.fork({ CLAWGATE_WORKER: "1" });
    this.#slots.set(worker.id, { slot });
    // One hung while it loads (never says hello) is never pinged: WorkerLiveness watches only
    // workers that hear messages. Killed, it counts as a death, so its backoff applies.
    const helloDeadline = setTimeout(() => {
      const detail = `no hello within ${this.#helloTimeoutMs} ms of its fork`;
      this.#failures.set(worker.id, new WorkerStartError(`proxy worker ${worker.id}: ${detail}`));
      this.#killHung(worker.id, "hello-timeout", detail);
    }, this.#helloTimeoutMs);
    helloDeadline.unref();
    this.#helloDeadlines.set(worker.id, helloDeadline);
    worker.on("online", () => {
      this.#logger.info({ worker: worker.id, pid: worker.process.pid }, "proxy worker started");
    });
    worker.on("message", (message: unknown) => {
      if (isFromWorker(message)) this.#onMessage(worker, message);
    });
    // A send to a worker that died after the isConnected check fails with EPIPE on the IPC
    // channel, emitted here; unhandled, it would end the primary. The exit that follows is
    // what settles the worker's share.
    worker.on("error", (err) => {
      this.#logger.warn({ err, worker: worker.id }, "message to a proxy worker failed");
    });
    worker.on("exit", (code, signal) => {
      clearTimeout(this.#helloDeadlines.get(worker.id));
      this.#helloDeadlines.delete(worker.id);
      const slot = this.#slots.get(worker.id);
      this.#slots.delete(worker.id);
      const failure = this.#failures.get(worker.id);
      this.#failures.delete(worker.id);
      this.#listening.delete(worker.id);
      this.#hearing.delete(worker.id);
      // It owes no answer any more: an apply or a scrape completes with the workers left.
      this.#applies.gone(worker.id);
      this.#metrics.gone(worker.id);
      this.#onGone(worker.id);
      // Its breakers died with it; the worker that replaces it starts with them closed.
      this.breakers.gone(worker.id);
      this.#onBreakers();
      this.#liveness.gone(worker.id);
      const killed = this.#killed.get(worker.id);
      this.#killed.delete(worker.id);
      if (this.#stopping || this.#startFailed) return;
      if (!this.#listened) {
        const how = signal ?? `code ${code}`;
        this.#failStart(
          failure ??
            new WorkerStartError(
              `proxy worker ${worker.id} exited (${killed ?? how}) before any worker listened`,
            ),
        );
        return;
      }
      this.#restarts.inc({ reason: killed ?? "exited" });
      const served = slot?.listeningAt === undefined ? 0 : performance.now() - slot.listeningAt;
      const restartInMs = this.#backoffs[slot?.slot ?? 0]!.died(served);
      this.#logger.error(
        {
          worker: worker.id,
          pid: worker.process.pid,
          code,
          signal,
          reason: failure?.message ?? killed,
          restartInMs,
        },
        "proxy worker died; starting another",
      );
      this.#forkAfter(slot?.slot ?? 0, restartInMs);
    });
  }

  /** A replacement in the dead worker's slot: at once, or after its backoff. */
  #forkAfter(slot: number, delayMs: number): void {
    if (delayMs === 0) {
      this.#fork(slot);
      return;
    }
    const fork = setTimeout(() => {
      this.#pendingForks.delete(fork);
      if (!this.#stopping) this.#fork(slot);
    }, delayMs);
    this.#pendingForks.add(fork);
  }

  /** A worker died before any listened: the data plane cannot serve; start() fails with why. */
  #failStart(error: Error): void {
    this.#startFailed = true;
    this.#rejectListening(error);
  }

  #onMessage(worker: Worker, message: FromWorker): void {
    switch (message.type) {
      case "clawgate:hello":
        clearTimeout(this.#helloDeadlines.get(worker.id));
        this.#helloDeadlines.delete(worker.id);
        // Joining in the middle of an apply would leave it on the old version: it waits for
        // the apply to end and starts from the version the others then serve.
        this.#applies.whenIdle(() => {
          if (worker.isDead()) return;
          this.#hearing.add(worker.id);
          const served = this.#served();
          this.#send(worker, {
            type: "clawgate:init",
            snapshot: served && Buffer.from(toBinary(SnapshotSchema, served)).toString("base64"),
            unusable: [...this.#unusable.values()],
          });
        });
        return;
      case "clawgate:failed":
        this.#failures.set(worker.id, failureError(worker.id, message));
        return;
      case "clawgate:listening": {
        const slot = this.#slots.get(worker.id);
        if (slot !== undefined) slot.listeningAt = performance.now();
        this.#listened = true;
        this.#listening.add(worker.id);
        this.#resolveListening({ proxy: message.address, tls: message.tlsAddress });
        return;
      }
      case "clawgate:refused":
        this.#onRefused(message.upstream, message.address);
        return;
      case "clawgate:prepared":
        this.#applies.prepared(
          worker.id,
          message.id,
          message.ok ? { ok: true } : { ok: false, reason: message.reason ?? "refused" },
        );
        return;
      case "clawgate:committed":
        this.#applies.committed(worker.id, message.id);
        return;
      case "clawgate:outcomes":
        this.outcomes.reported(worker.id, message.versions);
        return;
      case "clawgate:breakers":
        this.breakers.reported(worker.id, message.breakers);
        this.#onBreakers();
        return;
      case "clawgate:pong":
        this.#liveness.pong(worker.id);
        return;
      case "clawgate:metrics-reply":
        this.#metrics.replied(worker.id, message.id, message.metrics);
        return;
      case "clawgate:quota-usage":
      case "clawgate:probe-claim":
        this.#onCoordination(worker.id, message);
        return;
    }
  }
}
