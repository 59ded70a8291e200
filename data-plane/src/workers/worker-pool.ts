import cluster, { type Worker } from "node:cluster";
import { type Snapshot, SnapshotSchema, toBinary } from "@clawgate/proto";
import type { Logger } from "pino";
import { Gauge, type Registry } from "prom-client";
import type { ApplyResult } from "../snapshot-client/snapshot-client.js";
import {
  type FromWorker,
  isFromWorker,
  type ToWorker,
  type UnusableNode,
} from "./worker-messages.js";

interface PendingApply {
  waiting: Set<number>;
  failures: string[];
  done: (result: ApplyResult) => void;
}

/**
 * The primary's side of `workers` > 1: forks the proxy workers, sends each of them every
 * snapshot and health change, answers an apply only when every live worker applied it, and
 * replaces a worker that dies at once (the cluster keeps the listening socket meanwhile).
 */
export class WorkerPool {
  readonly #count: number;
  readonly #logger: Logger;
  readonly #onRefused: (upstream: string, address: string) => void;
  /** The snapshot served now (base64 protobuf), given to every worker before it listens. */
  #current: string | undefined;
  readonly #unusable = new Map<string, UnusableNode>();
  readonly #pending = new Map<string, PendingApply>();
  readonly #listening = new Set<number>();
  /**
   * Workers that said hello, so they hear messages: one still loading its code would lose a
   * snapshot (and the ACK would wait for it forever); it gets the current one in init instead.
   */
  readonly #hearing = new Set<number>();
  #stopping = false;
  #firstListening: Promise<string>;
  #resolveListening!: (address: string) => void;

  constructor(options: {
    count: number;
    logger: Logger;
    registry: Registry;
    onRefused: (upstream: string, address: string) => void;
  }) {
    this.#count = options.count;
    this.#logger = options.logger;
    this.#onRefused = options.onRefused;
    this.#firstListening = new Promise((resolve) => {
      this.#resolveListening = resolve;
    });
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

  /** Forks every worker; resolves with the proxy address once the first one listens. */
  start(): Promise<string> {
    for (let i = 0; i < this.#count; i++) this.#fork();
    return this.#firstListening;
  }

  /** Live, listening worker pids (the log line "proxy worker started" names each too). */
  pids(): number[] {
    return Object.values(cluster.workers ?? {})
      .filter((w): w is Worker => w !== undefined && this.#listening.has(w.id))
      .map((w) => w.process.pid!);
  }

  /** Sends `snapshot` to every live worker; ok only when each applied it (a NACK otherwise). */
  apply(snapshot: Snapshot): Promise<ApplyResult> {
    const bytes = Buffer.from(toBinary(SnapshotSchema, snapshot)).toString("base64");
    this.#current = bytes;
    const version = String(snapshot.version);
    const workers = this.#hearingWorkers();
    if (workers.length === 0) return Promise.resolve({ ok: true });
    return new Promise((done) => {
      this.#pending.get(version)?.done({ ok: false, reason: "superseded" });
      this.#pending.set(version, {
        waiting: new Set(workers.map((w) => w.id)),
        failures: [],
        done,
      });
      for (const worker of workers) {
        this.#send(worker, { type: "clawgate:snapshot", snapshot: bytes, version });
      }
    });
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

  /** Drains every worker (each lets its requests finish within drainTimeoutMs) and waits. */
  async stop(drainTimeoutMs: number): Promise<void> {
    this.#stopping = true;
    const exits = this.#live().map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (worker.isDead()) return resolve();
          worker.once("exit", () => resolve());
          // One not yet running its code has no requests to drain.
          if (this.#hearing.has(worker.id)) {
            this.#send(worker, { type: "clawgate:stop", drainTimeoutMs });
          } else worker.kill();
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

  #send(worker: Worker, message: ToWorker): void {
    // A worker that just died cannot take it; its exit handler settles what it owed.
    if (worker.isConnected()) worker.send(message);
  }

  #fork(): void {
    const worker = cluster.fork({ CLAWGATE_WORKER: "1" });
    worker.on("online", () => {
      this.#logger.info({ worker: worker.id, pid: worker.process.pid }, "proxy worker started");
    });
    worker.on("message", (message: unknown) => {
      if (isFromWorker(message)) this.#onMessage(worker, message);
    });
    worker.on("exit", (code, signal) => {
      this.#listening.delete(worker.id);
      this.#hearing.delete(worker.id);
      // It owes no answer any more: the apply completes with the workers left.
      for (const [version, pending] of this.#pending) this.#answered(version, pending, worker.id);
      if (this.#stopping) return;
      this.#logger.error(
        { worker: worker.id, pid: worker.process.pid, code, signal },
        "proxy worker died; starting another",
      );
      this.#fork();
    });
  }

  #onMessage(worker: Worker, message: FromWorker): void {
    switch (message.type) {
      case "clawgate:hello":
        this.#hearing.add(worker.id);
        this.#send(worker, {
          type: "clawgate:init",
          snapshot: this.#current,
          unusable: [...this.#unusable.values()],
        });
        return;
      case "clawgate:listening":
        this.#listening.add(worker.id);
        this.#resolveListening(message.address);
        return;
      case "clawgate:refused":
        this.#onRefused(message.upstream, message.address);
        return;
      case "clawgate:applied": {
        const pending = this.#pending.get(message.version);
        if (pending === undefined) return;
        if (!message.ok) pending.failures.push(`worker ${worker.id}: ${message.reason}`);
        this.#answered(message.version, pending, worker.id);
        return;
      }
    }
  }

  #answered(version: string, pending: PendingApply, workerId: number): void {
    if (!pending.waiting.delete(workerId) || pending.waiting.size > 0) return;
    this.#pending.delete(version);
    pending.done(
      pending.failures.length === 0
        ? { ok: true }
        : { ok: false, reason: pending.failures.join("; ") },
    );
  }
}
