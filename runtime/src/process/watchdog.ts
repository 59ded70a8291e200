import type { CheckResult } from "./self-check.js";

export type WatchdogLogger = {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
};

/**
 * How often to ping the systemd watchdog, or undefined when it is off for this process.
 * Half of WATCHDOG_USEC, as sd_watchdog_enabled(3) advises, so one late tick is not a kill.
 * WATCHDOG_PID, when set, names the one process the watchdog is meant for (not a child).
 */
export function watchdogIntervalMs(
  env: Readonly<Record<string, string | undefined>>,
  pid: number = process.pid,
): number | undefined {
  const usec = Number(env.WATCHDOG_USEC);
  if (!Number.isFinite(usec) || usec <= 0) return undefined;
  const owner = env.WATCHDOG_PID;
  if (owner !== undefined && owner !== "" && Number(owner) !== pid) return undefined;
  return Math.max(1, Math.floor(usec / 1000 / 2));
}

export interface WatchdogOptions {
  /** Time between self-checks (and pings when they pass). */
  intervalMs: number;
  /** Run on every tick; the ping is sent only when it passes. */
  check: () => CheckResult;
  /** Sends WATCHDOG=1. */
  ping: () => void;
  logger: WatchdogLogger;
}

export interface Watchdog {
  stop(): void;
}

/**
 * Pings only while the self-check passes. A blocked event loop stops the pings twice over: the
 * timer cannot fire, and the first tick after the stall sees the stall and skips its ping. A
 * process that stays unhealthy for WatchdogSec is killed and restarted by systemd.
 */
export function startWatchdog(options: WatchdogOptions): Watchdog {
  const { intervalMs, check, ping, logger } = options;
  let failing = false;
  const tick = () => {
    let result: CheckResult;
    try {
      result = check();
    } catch (err) {
      result = {
        ok: false,
        reason: `self-check threw: ${err instanceof Error ? err.message : err}`,
      };
    }
    if (result.ok) {
      if (failing) logger.info({}, "self-check passes again; watchdog pings resumed");
      failing = false;
      ping();
      return;
    }
    if (!failing) {
      logger.warn(
        { reason: result.reason, intervalMs },
        "self-check failed; withholding the watchdog ping (systemd restarts the process if this persists)",
      );
    }
    failing = true;
  };
  const timer = setInterval(tick, intervalMs);
  // The watchdog must never be what keeps a stopping process alive.
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
