import type { Snapshot } from "@clawgate/proto";
import {
  type CompiledSnapshot,
  type CompileResult,
  compileSnapshot,
} from "../compiler/compile-snapshot.js";

export type { CompiledSnapshot, CompileResult };

/** Where a served snapshot came from: streamed by a control plane, or read from the disk cache. */
export type SnapshotSource = "control-plane" | "cache";

/** The snapshot being served, when it was applied and where from, swapped as one value. */
export interface AppliedState {
  readonly compiled: CompiledSnapshot;
  /** Unix milliseconds when this data plane swapped it in. */
  readonly appliedAtMs: number;
  readonly source: SnapshotSource;
}

export interface AppliedSnapshotOptions {
  /** Turns a wire snapshot into its immutable compiled form; default compileSnapshot. */
  compile?: (snapshot: Snapshot) => CompileResult;
  /** Clock for the applied time; default Date.now. */
  now?: () => number;
}

/**
 * Holds the compiled snapshot the proxy serves in a single reference. A request reads it once
 * and keeps that object for its whole life, so a swap never mixes versions inside a request.
 * A snapshot that fails to compile leaves the last good one in place.
 */
export class AppliedSnapshot {
  readonly #compile: (snapshot: Snapshot) => CompileResult;
  readonly #now: () => number;
  #state: AppliedState | undefined;

  constructor(options: AppliedSnapshotOptions = {}) {
    this.#compile = options.compile ?? compileSnapshot;
    this.#now = options.now ?? Date.now;
  }

  /** The compiled snapshot to serve; undefined until one has been applied. */
  current(): CompiledSnapshot | undefined {
    return this.#state?.compiled;
  }

  /** The compiled snapshot with its applied time; undefined until one has been applied. */
  state(): AppliedState | undefined {
    return this.#state;
  }

  /** Version being served; 0 before any, as the Hello's lastAppliedVersion expects. */
  version(): number {
    return this.#state?.compiled.version ?? 0;
  }

  /** Compiles the snapshot and, only if that succeeds, swaps it in; source default control-plane. */
  apply(snapshot: Snapshot, source: SnapshotSource = "control-plane"): CompileResult {
    const result = this.#compile(snapshot);
    if (result.ok)
      this.#state = Object.freeze({ compiled: result.value, appliedAtMs: this.#now(), source });
    return result;
  }
}
