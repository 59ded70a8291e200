import { setImmediate as nextTurn } from "node:timers/promises";
import type { Snapshot } from "@clawgate/proto";
import { compileSnapshotSteps } from "./compile-snapshot.js";
import type { CompileResult } from "./compiled-types.js";

/** Default longest stretch of compiling before clients get the event loop back. */
export const DEFAULT_TURN_MS = 10;

export interface CompileInTurnsOptions {
  /** Compile for about this long, then let the event loop run; default 10 ms. */
  turnMs?: number;
  /** Checked at every turn: true stops compiling (a newer snapshot arrived); default never. */
  superseded?: () => boolean;
  /** Clock in ms; default performance.now. */
  now?: () => number;
}

/**
 * Compiles a whole snapshot across event-loop turns: at 10,000 routes compiling in one go
 * blocked every client of the data plane for over a second. Requests meanwhile are served by
 * the previous snapshot, untouched until the caller swaps. Resolves to undefined when
 * `superseded` said so: the half-compiled snapshot is dropped.
 */
export async function compileInTurns(
  snapshot: Snapshot,
  options: CompileInTurnsOptions = {},
): Promise<CompileResult | undefined> {
  const turnMs = options.turnMs ?? DEFAULT_TURN_MS;
  const now = options.now ?? (() => performance.now());
  const superseded = options.superseded ?? (() => false);
  const steps = compileSnapshotSteps(snapshot);
  let turnStart = now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (now() - turnStart < turnMs) continue;
    await nextTurn();
    if (superseded()) return undefined;
    turnStart = now();
  }
}
