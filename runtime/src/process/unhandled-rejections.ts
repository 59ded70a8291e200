import type { Logger } from "pino";

/**
 * Logs a promise rejection nobody handled instead of letting node end the process with it
 * (node's default since v15). The request path keeps no promise of its own, but a rejection
 * from a library callback while serving one request must not take down every other request
 * and, through the snapshot replayed at restart, crash-loop the fleet. A thrown exception is
 * different (state may be half-updated) and still ends the process; the request path catches
 * its own (proxy-handler, proxy-exchange). Returns a function that removes the listener.
 */
export function logUnhandledRejections(logger: Logger): () => void {
  const onRejection = (reason: unknown) => {
    const err =
      reason instanceof Error
        ? { message: reason.message, stack: reason.stack }
        : { message: String(reason) };
    logger.error({ err }, "unhandled promise rejection; serving on");
  };
  process.on("unhandledRejection", onRejection);
  return () => process.off("unhandledRejection", onRejection);
}
