import type { Notifier } from "./sd-notify.js";

export type ShutdownLogger = {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
};

export interface ShutdownOptions {
  logger: ShutdownLogger;
  notifier: Notifier;
  /**
   * The graceful stop: drain requests (within the drain timeout), then close pools and
   * streams. Resolves when everything is closed.
   */
  stop: () => Promise<void>;
  /**
   * Hard deadline for `stop`, in ms: past it the process exits anyway. Keep it under systemd's
   * TimeoutStopSec (15 s) so the process exits on its own rather than being SIGKILLed.
   */
  deadlineMs: number;
  /**
   * Asked on a second signal: true when it cut a wait short (the drain delay) and the graceful
   * stop goes on; false to exit at once. Default: always exit at once.
   */
  hurry?: () => boolean;
  /** Default process.exit. */
  exit?: (code: number) => void;
  /** Default SIGTERM and SIGINT. */
  signals?: readonly NodeJS.Signals[];
}

/**
 * First signal: STOPPING=1 and a graceful stop, then exit 0. A second signal first skips the
 * drain delay if `hurry` has one to skip; otherwise it, or the deadline, ends the process at
 * once, also with 0: the stop was asked for, so systemd should record a
 * clean stop rather than a failure (the log says what was cut). Returns an uninstaller.
 */
export function onShutdownSignals(options: ShutdownOptions): () => void {
  const { logger, notifier, stop, deadlineMs } = options;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const signals = options.signals ?? ["SIGTERM", "SIGINT"];
  let stopping = false;
  let deadline: NodeJS.Timeout | undefined;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      if (options.hurry?.() === true) {
        logger.warn({ signal }, "second signal while stopping; draining now");
        return;
      }
      logger.warn({ signal }, "second signal while stopping; exiting now");
      exit(0);
      return;
    }
    stopping = true;
    logger.info({ signal, deadlineMs }, "stopping: draining requests in flight");
    notifier.stopping();
    deadline = setTimeout(() => {
      logger.warn({ deadlineMs }, "graceful stop did not finish in time; exiting now");
      exit(0);
    }, deadlineMs);
    stop().then(
      () => {
        clearTimeout(deadline);
        logger.info({}, "stopped");
        notifier.close();
        exit(0);
      },
      (err: unknown) => {
        clearTimeout(deadline);
        logger.error(
          { err: err instanceof Error ? err.message : String(err) },
          "graceful stop failed",
        );
        notifier.close();
        exit(1);
      },
    );
  };
  for (const signal of signals) process.on(signal, handler);
  return () => {
    clearTimeout(deadline);
    for (const signal of signals) process.off(signal, handler);
  };
}
