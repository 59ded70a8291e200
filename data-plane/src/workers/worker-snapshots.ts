import { fromBinary, SnapshotDeltaSchema, SnapshotSchema } from "@clawgate/proto";
import { compileDelta } from "../compiler/compile-delta.js";
import { compileInTurns } from "../compiler/compile-in-turns.js";
import type { CompiledSnapshot, CompileResult } from "../compiler/compile-snapshot.js";
import { FrozenCompiledSnapshot } from "../compiler/frozen-compiled-snapshot.js";
import type { WorkerUpdate } from "./worker-messages.js";

export type Vote = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/**
 * A worker's side of the two-phase apply: `prepare` compiles an update and holds the result
 * without serving it; `commit` swaps it in (one assignment, so it cannot fail), `abort` drops
 * it. A worker therefore never serves a version the data plane as a whole refused.
 */
export class WorkerSnapshots {
  #current: CompiledSnapshot | undefined;
  #prepared: { readonly id: number; readonly compiled: CompiledSnapshot } | undefined;

  /** The compiled snapshot to serve; undefined until one is committed. */
  current(): CompiledSnapshot | undefined {
    return this.#current;
  }

  /** Serves a whole snapshot at once: the one the primary serves when this worker starts. */
  async init(bytes: string): Promise<Vote> {
    const result = await this.#compile({ kind: "snapshot", bytes });
    if (result.ok) this.#current = result.value;
    return result.ok ? { ok: true } : { ok: false, reason: result.reason };
  }

  /** Compiles `update` (a delta on the version served now) and holds it under `id`. */
  async prepare(id: number, update: WorkerUpdate): Promise<Vote> {
    this.#prepared = undefined;
    const result = await this.#compile(update);
    if (!result.ok) return { ok: false, reason: result.reason };
    this.#prepared = { id, compiled: result.value };
    return { ok: true };
  }

  /** Serves what `prepare(id)` compiled; the new snapshot, or undefined when none is held. */
  commit(id: number): CompiledSnapshot | undefined {
    const prepared = this.#prepared;
    if (prepared?.id !== id) return undefined;
    this.#prepared = undefined;
    this.#current = prepared.compiled;
    return prepared.compiled;
  }

  abort(id: number): void {
    if (this.#prepared?.id === id) this.#prepared = undefined;
  }

  async #compile(update: WorkerUpdate): Promise<CompileResult> {
    try {
      const bytes = Buffer.from(update.bytes, "base64");
      if (update.kind === "snapshot") {
        // Nothing supersedes it here: the primary sends one update at a time.
        return (await compileInTurns(fromBinary(SnapshotSchema, bytes)))!;
      }
      const delta = fromBinary(SnapshotDeltaSchema, bytes);
      const base = this.#current;
      if (!(base instanceof FrozenCompiledSnapshot)) {
        return refused(`delta ${delta.version} arrived before any snapshot was served`);
      }
      return compileDelta(base, delta);
    } catch (err) {
      return refused(`worker could not apply the update: ${(err as Error).message}`);
    }
  }
}

function refused(reason: string): CompileResult {
  return {
    ok: false,
    reason,
    problems: [{ kind: "snapshot", name: "", field: "", message: reason }],
  };
}
