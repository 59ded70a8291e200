/**
 * The config as it was at a version: the current config with every later entry's undo steps
 * applied, newest first, and the errors of a version that cannot be rebuilt.
 *
 * Why from the current config backwards: entries hold only the keys a write changed, with
 * their values before it (see config-history.ts), so the current config is the one full copy.
 */
import { RESOURCE_KINDS, type ResourceKind } from "@clawgate/proto";
import { clawgateError, type Outcome } from "../resources/errors.js";
import type { RangeResult } from "../store/store.js";
import type { ParsedEntry } from "./entry-reads.js";
import type { UndoStep } from "./history-entry.js";

/** One resource of a rebuilt config, in the shape POST /v1/apply takes. */
export interface HistoricResource {
  kind: ResourceKind;
  name: string;
  spec: unknown;
}

/** A config rebuilt from the history, and the store revision of the config it started from. */
export interface RebuiltConfig {
  current: number;
  resources: HistoricResource[];
}

/**
 * `read` (the config at read.revision, keys under `prefix`) with every entry newer than
 * `after` undone; `chunkSteps` reads the steps of an entry that keeps them in chunks.
 */
export async function undoEntries(
  read: RangeResult,
  prefix: string,
  entries: readonly ParsedEntry[],
  after: number,
  chunkSteps: (entry: ParsedEntry) => Promise<UndoStep[] | undefined>,
): Promise<Outcome<RebuiltConfig>> {
  const config = new Map<string, string>();
  for (const kv of read.items) config.set(kv.key.slice(prefix.length), kv.value);
  for (const entry of entries) {
    const { item } = entry;
    if (item.version <= after) break;
    const undo = entry.undo ?? (await chunkSteps(entry));
    if (undo === undefined) return noUndo(item.version);
    for (const step of undo) {
      if (step.before === null) config.delete(step.key);
      else config.set(step.key, step.before);
    }
  }
  return { ok: true, current: read.revision, resources: resourcesOf(config) };
}

/** `routes/api` -> a resource; keys of other kinds or unreadable values are left out. */
function resourcesOf(config: ReadonlyMap<string, string>): HistoricResource[] {
  const resources: HistoricResource[] = [];
  for (const [key, value] of config) {
    const slash = key.indexOf("/");
    const kind = key.slice(0, slash) as ResourceKind;
    if (slash < 0 || !RESOURCE_KINDS.includes(kind)) continue;
    try {
      resources.push({ kind, name: key.slice(slash + 1), spec: JSON.parse(value) });
    } catch {
      // Not JSON: it was written around the API and is not config the API can restore.
    }
  }
  return resources.sort((a, b) =>
    a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind.localeCompare(b.kind),
  );
}

export function noUndo(version: number) {
  return tooOld(
    `version ${version} has no undo steps kept (written before they were kept in chunks), so versions before it cannot be rebuilt`,
  );
}

export function tooOld(message: string): { ok: false; error: ReturnType<typeof clawgateError> } {
  return { ok: false, error: clawgateError("CLAWGATE_VERSION_TOO_OLD", message) };
}
