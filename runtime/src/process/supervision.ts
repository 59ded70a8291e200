import type { Notifier } from "./sd-notify.js";
import { createSelfCheck } from "./self-check.js";
import { installTestHooks } from "./test-hooks.js";
import { startWatchdog, watchdogIntervalMs } from "./watchdog.js";

export interface SupervisionOptions {
  /** Environment with WATCHDOG_USEC / WATCHDOG_PID; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  logger: {
    info(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
  };
  notifier: Notifier;
  /** Longest event-loop stall per watchdog interval before pings are withheld, in ms. */
  maxEventLoopDelayMs: number;
  /** Largest used/limit heap ratio before pings are withheld. */
  maxHeapRatio: number;
}

export interface Supervision {
  /** Ping interval in ms, or undefined when systemd asked for no watchdog. */
  readonly watchdogIntervalMs: number | undefined;
  stop(): void;
}

/**
 * Layer 1 of self-healing inside the process: when systemd runs a watchdog for this process,
 * ping it every WATCHDOG_USEC/2 while the self-check (event-loop stall, heap) passes.
 */
export function startSupervision(options: SupervisionOptions): Supervision {
  const env = options.env ?? process.env;
  const { logger, notifier } = options;
  installTestHooks(env, logger);
  const intervalMs = watchdogIntervalMs(env);
  if (intervalMs === undefined) return { watchdogIntervalMs: undefined, stop: () => {} };
  const selfCheck = createSelfCheck({
    maxEventLoopDelayMs: options.maxEventLoopDelayMs,
    maxHeapRatio: options.maxHeapRatio,
    intervalMs,
  });
  const watchdog = startWatchdog({
    intervalMs,
    check: () => selfCheck.check(),
    ping: () => notifier.watchdog(),
    logger,
  });
  logger.info(
    {
      intervalMs,
      maxEventLoopDelayMs: options.maxEventLoopDelayMs,
      maxHeapRatio: options.maxHeapRatio,
    },
    "systemd watchdog enabled",
  );
  return {
    watchdogIntervalMs: intervalMs,
    stop() {
      watchdog.stop();
      selfCheck.stop();
    },
  };
}
