import type { ApplyResult, SnapshotApplyResult } from "../snapshot-client/snapshot-client.js";
import type { ToWorker, WorkerUpdate } from "./worker-messages.js";
import type { Vote } from "./worker-snapshots.js";

/** The workers an apply involves: those that hear messages now, by cluster worker id. */
export interface Participants {
  ids(): number[];
  send(id: number, message: ToWorker): void;
}

/** What an apply does about a worker that does not answer. */
export interface HangPolicy {
  /** How long each phase waits for a worker's answer before it counts that worker hung. */
  readonly answerTimeoutMs: number;
  /** Called once per worker found hung; the apply goes on without it (the pool kills it). */
  readonly hung: (workerId: number, reason: string) => void;
}

interface Phase {
  readonly id: number;
  readonly step: string;
  readonly waiting: Set<number>;
  readonly failures: string[];
  readonly done: () => void;
}

/**
 * Applies an update in every worker and in the primary as one step, so a data plane never
 * serves two versions at once: every worker prepares (compiles and holds) it; only if all of
 * them and then the primary accept does each worker commit (swap). One refusal aborts the
 * rest, and the NACK carries the refusing worker's reason. The apply resolves only once every
 * worker committed, so the ACK that follows means every worker serves the version.
 *
 * A worker that dies owes nothing more (`gone`): the apply completes with those left, and its
 * replacement starts from the primary's snapshot once no apply is under way (`whenIdle`).
 * A worker alive but hung (its event loop stuck) would hold every apply forever: one that
 * has not answered within `answerTimeoutMs` is reported `hung` and treated as gone. That is
 * no NACK: the version was not refused, a process failed, and its replacement starts on the
 * version this apply leaves served.
 */
export class TwoPhaseApply {
  readonly #participants: Participants;
  #nextId = 1;
  #phase: Phase | undefined;
  #running = 0;
  #queue: Promise<unknown> = Promise.resolve();
  readonly #idle: (() => void)[] = [];
  readonly #hang: HangPolicy | undefined;
  #stopped = false;

  /** Without `hang`, an apply waits for each worker's answer without limit. */
  constructor(participants: Participants, hang?: HangPolicy) {
    this.#participants = participants;
    this.#hang = hang;
  }

  /**
   * Prepares `update` in every worker, then runs `local` (the primary's own apply, which swaps
   * on success), then commits in the workers; aborts them when anyone refuses. Applies run one
   * after another, in call order. `update` may be a function, called when the apply's turn
   * comes (what it applies depends on what the applies before it left served); undefined
   * from it, or a turn that comes after stop(), resolves undefined with nothing applied.
   */
  run(
    update: WorkerUpdate | (() => WorkerUpdate | undefined),
    local: () => Promise<SnapshotApplyResult>,
  ): Promise<SnapshotApplyResult> {
    this.#running++;
    const result = this.#queue.then(() => this.#run(update, local));
    this.#queue = result.catch(() => undefined);
    return result.finally(() => {
      if (--this.#running === 0) for (const run of this.#idle.splice(0)) run();
    });
  }

  /**
   * No apply starts from now on (the data plane is stopping): a worker draining its requests
   * answers nothing until it exits, so one would only wait on the drain. An apply under way
   * ends as its workers answer or exit.
   */
  stop(): void {
    this.#stopped = true;
  }

  /** Runs `fn` at once when no apply is under way, else right after the last one ends. */
  whenIdle(fn: () => void): void {
    if (this.#running === 0) fn();
    else this.#idle.push(fn);
  }

  /** A worker's answer to prepare. */
  prepared(workerId: number, id: number, vote: Vote): void {
    if (this.#phase?.id !== id) return;
    if (!vote.ok) this.#phase.failures.push(`worker ${workerId}: ${vote.reason}`);
    this.#answered(workerId);
  }

  /** A worker's answer to commit. */
  committed(workerId: number, id: number): void {
    if (this.#phase?.id === id) this.#answered(workerId);
  }

  /** A worker died: it owes no answer any more. */
  gone(workerId: number): void {
    this.#answered(workerId);
  }

  async #run(
    next: WorkerUpdate | (() => WorkerUpdate | undefined),
    local: () => Promise<SnapshotApplyResult>,
  ): Promise<SnapshotApplyResult> {
    if (this.#stopped) return undefined;
    const update = typeof next === "function" ? next() : next;
    if (update === undefined) return undefined;
    const workers = this.#participants.ids();
    if (workers.length === 0) return local();
    const id = this.#nextId++;
    const failures = await this.#ask(id, "prepare", workers, {
      type: "clawgate:prepare",
      id,
      update,
    });
    if (failures.length > 0) {
      this.#sendAll(workers, { type: "clawgate:abort", id });
      return { ok: false, reason: failures.join("; ") } satisfies ApplyResult;
    }
    let result: SnapshotApplyResult;
    try {
      result = await local();
    } catch (err) {
      // Nothing was swapped here: the workers drop what they hold, and the caller NACKs.
      this.#sendAll(workers, { type: "clawgate:abort", id });
      throw err;
    }
    if (result?.ok !== true) {
      this.#sendAll(workers, { type: "clawgate:abort", id });
      return result;
    }
    await this.#ask(id, "commit", workers, { type: "clawgate:commit", id });
    return result;
  }

  /** Sends `message` to `workers` and resolves with the refusals once each answered or died. */
  #ask(id: number, step: string, workers: readonly number[], message: ToWorker): Promise<string[]> {
    return new Promise((resolve) => {
      const hang = this.#hang;
      const timer =
        hang &&
        setTimeout(() => {
          for (const worker of [...phase.waiting]) {
            hang.hung(worker, `no answer to ${phase.step} within ${hang.answerTimeoutMs} ms`);
            this.#answered(worker);
          }
        }, hang.answerTimeoutMs);
      const phase: Phase = {
        id,
        step,
        waiting: new Set(workers),
        failures: [],
        done: () => {
          clearTimeout(timer);
          resolve(phase.failures);
        },
      };
      this.#phase = phase;
      this.#sendAll(workers, message);
      // Any that died in the meantime were never going to answer.
      const alive = new Set(this.#participants.ids());
      for (const worker of workers) if (!alive.has(worker)) this.#answered(worker);
    });
  }

  /**
   * Sends to those of `workers` that still participate: one found hung was SIGKILLed, and a
   * write to it once it is dead fails (EPIPE) as an 'error' event on its cluster Worker, which
   * nothing listens to, so it would end the primary.
   */
  #sendAll(workers: readonly number[], message: ToWorker): void {
    const participating = new Set(this.#participants.ids());
    for (const worker of workers) {
      if (participating.has(worker)) this.#participants.send(worker, message);
    }
  }

  #answered(workerId: number): void {
    const phase = this.#phase;
    if (phase === undefined || !phase.waiting.delete(workerId) || phase.waiting.size > 0) return;
    this.#phase = undefined;
    phase.done();
  }
}
