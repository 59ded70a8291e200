import type { Logger } from "pino";
import type { ConfigService } from "./config-service.js";

export interface ApplySweeper {
  stop(): void;
}

/** How often each control plane looks for an apply abandoned by a dead control plane. */
const SWEEP_INTERVAL_MS = 5_000;

/**
 * Rolls back, from any control plane, a big apply whose control plane died half-way (its gate
 * would otherwise keep every write refused and every snapshot unpublished). One small read per
 * sweep; a failed sweep is retried at the next one.
 */
export function startApplySweeper(
  config: Pick<ConfigService, "recoverAbandonedApply">,
  logger: Pick<Logger, "info" | "warn">,
  intervalMs = SWEEP_INTERVAL_MS,
): ApplySweeper {
  let running = false;
  const sweep = async () => {
    if (running) return;
    running = true;
    try {
      const outcome = await config.recoverAbandonedApply();
      if (outcome === "rolled-back") {
        logger.info("rolled back an apply left half-way by a control plane that stopped");
      }
    } catch (error) {
      logger.warn({ err: error }, "could not check for an abandoned apply");
    } finally {
      running = false;
    }
  };
  void sweep();
  const timer = setInterval(() => void sweep(), intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
