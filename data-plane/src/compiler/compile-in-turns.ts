import type { Snapshot } from "@clawgate/proto";
import { type RunInTurnsOptions, runInTurns } from "../turns/run-in-turns.js";
import { compileSnapshotSteps } from "./compile-snapshot.js";
import type { CompileResult } from "./compiled-types.js";

export { DEFAULT_TURN_MS } from "../turns/run-in-turns.js";

/** `superseded` means a newer snapshot arrived. */
export type CompileInTurnsOptions = RunInTurnsOptions;

/**
 * Compiles a whole snapshot across event-loop turns: at 10,000 routes compiling in one go
 * blocked every client of the data plane for over a second. Requests meanwhile are served by
 * the previous snapshot, untouched until the caller swaps. Resolves to undefined when
 * `superseded` said so: the half-compiled snapshot is dropped.
 */
export function compileInTurns(
  snapshot: Snapshot,
  options: CompileInTurnsOptions = {},
): Promise<CompileResult | undefined> {
  return runInTurns(compileSnapshotSteps(snapshot), options);
}
