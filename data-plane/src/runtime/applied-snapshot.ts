import type { Snapshot, SnapshotDelta } from "@clawgate/proto";
import { compileDelta } from "../compiler/compile-delta.js";
import { compileInTurns } from "../compiler/compile-in-turns.js";
import {
  type CompiledSnapshot,
  type CompileResult,
  compileSnapshot,
} from "../compiler/compile-snapshot.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";

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
  /**
   * Turns a wire snapshot into its immutable compiled form; default compileSnapshot (and, for
   * applyInTurns, the same compiler cut across event-loop turns).
   */
  compile?: (snapshot: Snapshot) => CompileResult;
  /** Clock for the applied time; default Date.now. */
  now?: () => number;
}

/**
 * Holds the compiled snapshot the proxy serves in a single reference. A request reads it once
 * and keeps that object for its whole life, so a swap never mixes versions inside a request.
 * A snapshot or delta that fails to compile leaves the last good one in place.
 */
export class AppliedSnapshot {
  readonly #compile: ((snapshot: Snapshot) => CompileResult) | undefined;
  readonly #now: () => number;
  #state: AppliedState | undefined;

  constructor(options: AppliedSnapshotOptions = {}) {
    this.#compile = options.compile;
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
    return this.#swap((this.#compile ?? compileSnapshot)(snapshot), source);
  }

  /**
   * `apply`, compiling across event-loop turns (compileInTurns) so a big snapshot never blocks
   * clients for long; the swap itself is one assignment at the end. Resolves to undefined, and
   * swaps nothing, when `superseded` turns true before the compile is done.
   */
  async applyInTurns(
    snapshot: Snapshot,
    source: SnapshotSource = "control-plane",
    superseded: () => boolean = () => false,
  ): Promise<CompileResult | undefined> {
    const result =
      this.#compile === undefined
        ? await compileInTurns(snapshot, { superseded })
        : this.#compile(snapshot);
    if (result === undefined || superseded()) return undefined;
    return this.#swap(result, source);
  }

  /**
   * Compiles the delta on top of the snapshot served (which must be its base version) and, only
   * if that succeeds, swaps the result in: the same single swap as a whole snapshot.
   */
  applyDelta(delta: SnapshotDelta, source: SnapshotSource = "control-plane"): CompileResult {
    const base = this.#state?.compiled;
    if (!(base instanceof FrozenCompiledSnapshot)) {
      const reason = `delta ${delta.version} needs version ${delta.baseVersion}, but no compiled snapshot is served`;
      return {
        ok: false,
        reason,
        problems: [{ kind: "snapshot", name: "", field: "baseVersion", message: reason }],
      };
    }
    return this.#swap(compileDelta(base, delta), source);
  }

  #swap(result: CompileResult, source: SnapshotSource): CompileResult {
    if (result.ok)
      this.#state = Object.freeze({ compiled: result.value, appliedAtMs: this.#now(), source });
    return result;
  }
}
