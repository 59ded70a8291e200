import type { FromWorker, ToWorker } from "./worker-messages.js";

export interface WorkerInboxParts {
  /** Sends to the primary. */
  readonly send: (message: FromWorker) => void;
  /** Applies a lease, probe verdict or stream reset; false for other messages. */
  readonly coordinate: (message: ToWorker) => boolean;
  /** The worker's registry as prom-client's MetricObjectWithValues[]. */
  readonly metrics: () => Promise<unknown[]>;
  /** Handles init, prepare, commit, abort, health and stop, one at a time, in order. */
  readonly handle: (message: ToWorker) => Promise<void>;
  /** The worker cannot serve: it says why and exits (the promise never settles). */
  readonly failStart: (err: unknown) => Promise<never>;
  readonly logger: { error(obj: object, msg: string): void };
}

/**
 * A worker's dispatch of the primary's messages. Pings, coordination and scrapes are answered
 * at once, ahead of queued snapshot work; the rest wait their turn. A message that fails is
 * logged, never an uncaught error: a worker killed by it would be forked again and fail the
 * same way. Only a failed init ends the worker (failStart): it has nothing to serve.
 */
export function workerInbox(parts: WorkerInboxParts): (message: ToWorker) => void {
  const { send, logger } = parts;
  let queue: Promise<unknown> = Promise.resolve();

  function failed(message: ToWorker, err: unknown): Promise<never> | undefined {
    switch (message.type) {
      case "clawgate:init":
        logger.error({ err }, "proxy worker cannot start serving; exiting");
        return parts.failStart(err);
      case "clawgate:prepare":
        // A refusal the apply can NACK, rather than an answer it waits for until it kills us.
        send({
          type: "clawgate:prepared",
          id: message.id,
          ok: false,
          reason: `worker could not prepare the update: ${err instanceof Error ? err.message : String(err)}`,
        });
        return;
      default:
        logger.error({ err, type: message.type }, "proxy worker failed to handle a message");
        return;
    }
  }

  function receive(message: ToWorker): void {
    // Proof that this event loop turns, answered ahead of any queued snapshot work.
    if (message.type === "clawgate:ping") {
      send({ type: "clawgate:pong" });
      return;
    }
    // Leases and probe verdicts need not wait behind a snapshot being compiled either.
    if (parts.coordinate(message)) return;
    // A scrape need not wait behind a snapshot being compiled.
    if (message.type === "clawgate:metrics") {
      parts
        .metrics()
        .then((metrics) => send({ type: "clawgate:metrics-reply", id: message.id, metrics }))
        // Unanswered, the scrape goes on without this worker after its wait (WorkerMetrics).
        .catch((err: unknown) => logger.error({ err }, "collecting the worker's metrics failed"));
      return;
    }
    queue = queue.then(() => parts.handle(message)).catch((err: unknown) => failed(message, err));
  }

  return (message) => {
    try {
      receive(message);
    } catch (err) {
      logger.error({ err, type: message.type }, "proxy worker failed to handle a message");
    }
  };
}
