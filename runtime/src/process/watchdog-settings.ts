import { z } from "zod";
import { declareSettings } from "../settings/setting-declaration.js";

/**
 * The watchdog's self-check settings, the same for both binaries: each plane spreads these
 * into its own declaration, so the names, bounds and defaults cannot drift apart.
 */
export const WATCHDOG_SETTINGS = declareSettings({
  watchdogMaxEventLoopDelayMs: {
    variable: "CLAWGATE_WATCHDOG_MAX_EVENT_LOOP_DELAY_MS",
    flag: "watchdog-max-event-loop-delay-ms",
    // A missed ping is close to a kill, and a whole fleet compiles one snapshot at once.
    doc: "Longest event-loop stall per watchdog interval before WATCHDOG=1 is withheld.",
    type: z.int().min(10).max(600_000),
    default: 5_000,
  },
  watchdogMaxHeapRatio: {
    variable: "CLAWGATE_WATCHDOG_MAX_HEAP_RATIO",
    flag: "watchdog-max-heap-ratio",
    doc: "Used heap / V8 heap limit above which WATCHDOG=1 is withheld.",
    type: z.number().gt(0).max(1),
    default: 0.9,
  },
});
