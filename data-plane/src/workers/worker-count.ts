import { availableParallelism } from "node:os";
import type { DataPlaneConfig } from "../config/config-schema.js";

/** The number of proxy workers `workers` asks for: `auto` is one per CPU this process may use. */
export function workerCount(config: Pick<DataPlaneConfig, "workers">): number {
  return config.workers === "auto" ? availableParallelism() : config.workers;
}
