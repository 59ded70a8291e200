// Jittered exponential backoff: the control plane waits for etcd with the same policy the data
// plane reconnects with.
export { Backoff, type BackoffOptions } from "./backoff.js";
export { DrainDelay } from "./drain-delay.js";
export { type DrainResult, HttpDrain } from "./http-drain.js";
export { withDrainingReadiness } from "./readiness.js";
export {
  createNotifier,
  type DatagramSocket,
  type Notifier,
  type NotifierOptions,
} from "./sd-notify.js";
export {
  type CheckResult,
  createSelfCheck,
  type SelfCheck,
  type SelfCheckOptions,
} from "./self-check.js";
export { onShutdownSignals, type ShutdownOptions } from "./shutdown-signals.js";
export { type Supervision, type SupervisionOptions, startSupervision } from "./supervision.js";
export { BLOCK_ON_SIGUSR2_ENV, installTestHooks } from "./test-hooks.js";
export { logUnhandledRejections } from "./unhandled-rejections.js";
export {
  startWatchdog,
  type Watchdog,
  type WatchdogOptions,
  watchdogIntervalMs,
} from "./watchdog.js";
export { WATCHDOG_SETTINGS } from "./watchdog-settings.js";
export { settlesWithin } from "./within.js";

/** Settings both binaries share; their defaults and reasons live in each config schema. */
export const PROCESS_DEFAULTS = Object.freeze({
  /**
   * 5 s, not less: one failed check withholds a ping, and with pings every WatchdogSec/2 a
   * second miss is a kill. Every data plane compiles the same snapshot at the same moment, so a
   * limit a big compile could cross would restart the whole fleet at once. A real hang blocks
   * far longer than 5 s (the timer then never fires at all).
   */
  watchdogMaxEventLoopDelayMs: 5_000,
  /** 0.9: past this V8 spends most of its time in GC and an OOM crash is near. */
  watchdogMaxHeapRatio: 0.9,
  /** 10 s: drains requests in flight within systemd's TimeoutStopSec=15, with room to close. */
  drainTimeoutMs: 10_000,
});

/** Time after the drain timeout to close pools and streams before the process exits anyway. */
export const CLOSE_GRACE_MS = 2_000;
