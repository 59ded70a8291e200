import { ListenError } from "../runtime/listen.js";
import type { FromWorker } from "./worker-messages.js";

type FailedMessage = Extract<FromWorker, { type: "clawgate:failed" }>;

/** Why a worker cannot serve, as it tells the primary (a ListenError keeps its parts). */
export function failedMessage(err: unknown): FailedMessage {
  const reason = err instanceof Error ? err.message : String(err);
  if (!(err instanceof ListenError)) return { type: "clawgate:failed", reason };
  const detail = err.cause instanceof Error ? err.cause.message : reason;
  return {
    type: "clawgate:failed",
    reason,
    listen: { listener: err.listener, address: err.address, code: err.code, detail },
  };
}

/** The error a worker's failure stands for in the primary: its ListenError, or its reason. */
export function failureError(worker: number, message: FailedMessage): Error {
  const { listen } = message;
  if (listen === undefined) {
    return new WorkerStartError(`proxy worker ${worker} cannot serve: ${message.reason}`);
  }
  const cause = Object.assign(new Error(listen.detail), { code: listen.code });
  return new ListenError(listen.listener, listen.address, cause);
}

/** The data plane's workers could not start serving; the process exits 1 (like a ListenError). */
export class WorkerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WorkerStartError";
  }
}

/**
 * A worker that cannot serve says why to the primary and exits, rather than die of an unhandled
 * rejection or listen with nothing to serve; the primary fails its start with the reason at
 * boot and forks another with backoff later (WorkerPool).
 */
export function exitAsFailed(err: unknown): Promise<never> {
  const exit = () => process.exit(1);
  if (!process.connected || process.send === undefined) exit();
  // Exit once the message is on the channel, whether or not it could be sent.
  else process.send(failedMessage(err), undefined, {}, exit);
  // Never settles: whatever waits on it (the worker's message queue) handles nothing more.
  return new Promise<never>(() => {});
}
