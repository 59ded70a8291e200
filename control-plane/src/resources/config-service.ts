import {
  RESOURCE_KINDS,
  RESOURCE_NAME,
  type ResourceDocuments,
  type ResourceKind,
  validateResource,
} from "@clawgate/proto";
import type { KeyWrite } from "../history/config-history.js";
import { rolloutFence } from "../rollout/rollout-fence.js";
import { rolloutKey } from "../rollout/rollout-state.js";
import { ConfigModel } from "../snapshot/config-model.js";
import type { Compare, KeyValue, Operation, Store } from "../store/store.js";
import {
  applyGateKey,
  gateMessage,
  kindPrefixes,
  readKeyOutsideApply,
  readOutsideApply,
} from "./apply-gate.js";
import { type ApplyOwner, newApplyOwner } from "./apply-owner.js";
import { configGuardKey } from "./config-guard.js";
import { type ConfigOverlay, overlayOf } from "./config-overlay.js";
import { readConfigState, resourceKey, type StoredResource } from "./config-state.js";
import { type ConsistencyProblem, scopedConsistencyProblems } from "./consistency.js";
import { type ClawgateError, clawgateError, type FieldProblem, type Outcome } from "./errors.js";
import { byCodeUnits, firstAfter } from "./list-page.js";
import { NameOrder } from "./name-order.js";
import {
  type Recovery,
  recoverAbandonedApply,
  type StagedApplyHooks,
  stagedApply,
  takeOverOwnApply,
  writeBytes,
} from "./staged-apply.js";
import { tenantKeyConflict } from "./tenant-key-conflict.js";
import { type VettedChange, vettedChanges } from "./vetted-changes.js";

/**
 * Conditions a change is made under, checked against the revision read and pinned by the same
 * transaction that writes, so no other writer can slip in between the check and the write.
 */
export interface ChangePreconditions {
  /** The key must be at this revision; 0: it must not exist. */
  ifMatch?: number;
  /** The key must not exist ("*"), or must not be at any of these revisions. */
  ifNoneMatch?: "*" | readonly number[];
}

/** Put `document` (validated and defaulted first) or delete the resource. */
export type ResourceChange =
  | ({ kind: ResourceKind; name: string; document: unknown } & ChangePreconditions)
  | ({ kind: ResourceKind; name: string; delete: true } & ChangePreconditions);

export interface ApplyOptions {
  /** Validate and check everything, write nothing. Default false. */
  dryRun?: boolean;
  /** Delete resources of these kinds (true: every kind) the change set does not name. Default false. */
  prune?: boolean | ResourceKind[];
  /**
   * Writes that commit with the change, or not at all: the audit journal's event (written in
   * the same transaction, it adds no store revision of its own, so the version data planes are
   * sent stays the write's). Called with what the write will do and, for the config history,
   * each key it writes with the value it had before; not for a dry run. Default none.
   */
  alsoWrite?: (
    results: readonly AppliedResource[],
    writes: readonly KeyWrite[],
  ) => Operation[] | AlsoWrites;
  /**
   * The write ends the progressive rollout stored at this mod revision of its key (a rollout's
   * rollback), and commits only if the rollout is still as that decision saw it. Default none:
   * the write is refused while a rollout bakes (see rollout-fence.ts).
   */
  endsRollout?: number;
  /**
   * Refuses the write (a dry run too) for what it would change, e.g. a field only some roles
   * may set: called with each resource the write creates, updates or deletes, before and after
   * (undefined: absent). Default none.
   */
  vet?: (changes: readonly VettedChange[]) => ClawgateError | undefined;
}

/**
 * Journal writes in two parts. `commit` goes in the write's own commit. `ahead` are puts of new
 * keys that nothing reads until an operation of `commit` refers to them (the chunks of a big
 * history entry's undo steps): a write too big for one commit carries them in its staged
 * batches, rolled back with them, so they may be any size while the commit that makes the
 * change visible stays small.
 */
export interface AlsoWrites {
  commit: Operation[];
  ahead: Operation[];
  /**
   * Called with the write's revision once it committed: an attempt that lost a race is retried
   * with a fresh alsoWrite, so only the one that committed may be taken as written.
   */
  committed?: (revision: number) => void;
  /**
   * Runs once the write committed (not after a failed attempt), after `committed` and before
   * the write answers: deletes of keys the commit made garbage (a trimmed history entry's
   * hundreds of chunks, more than a commit takes). Must not throw: the write is made whatever
   * it does.
   */
  afterCommit?: () => Promise<void>;
}

/** Both parts of what alsoWrite returned. */
function alsoWrites(also: Operation[] | AlsoWrites | undefined): AlsoWrites {
  if (also === undefined) return { commit: [], ahead: [] };
  return Array.isArray(also) ? { commit: also, ahead: [] } : also;
}

export type ApplyAction = "created" | "updated" | "deleted" | "unchanged";

export interface AppliedResource {
  kind: ResourceKind;
  name: string;
  action: ApplyAction;
  /**
   * The key's mod revision after the write (for a delete, the deleting revision). In a dry run,
   * the revision it has now (0 when it would be created).
   */
  revision: number;
}

export type ApplyResult = Outcome<{
  /** Store revision after the commit; the revision read when nothing was written. */
  revision: number;
  dryRun: boolean;
  results: AppliedResource[];
}>;

export interface ConfigServiceOptions {
  /** Commits tried before giving up with CLAWGATE_STORE_CONFLICT; default 5. */
  maxAttempts?: number;
  /** Hooks into applies too big for one transaction (tests fail them half-way). */
  stagedHooks?: StagedApplyHooks;
  /** Owner lease of such an apply, renewed while it runs: how long a dead control plane blocks writes; default 5 s. */
  applyLeaseTtlSeconds?: number;
  /**
   * Where this control plane runs, unique among live ones and kept across restarts (main.ts:
   * host name and admin listen address). With it, an apply this control plane left half-way
   * when it died is taken over by its restarted self at the first write (apply-owner.ts)
   * instead of refusing writes until the lease above runs out; default none.
   */
  applyOwnerSlot?: string;
  /**
   * The config model writes are checked against, shared with the snapshot builder; default one
   * of the service's own, started by the first write.
   */
  model?: ConfigModel;
  /**
   * Longest a write waits for the model to catch up: with a write just committed (so the next
   * request sees it) or with the store after a conflict; default 5 s.
   */
  catchUpMs?: number;
}

/** Logs of a model the service makes for itself: its relists are retried, not reported. */
const QUIET = { debug() {}, info() {}, warn() {} };

export { configGuardKey } from "./config-guard.js";

interface ParsedChange {
  kind: ResourceKind;
  name: string;
  key: string;
  /** Serialized, defaulted document; undefined for a delete. */
  value: string | undefined;
  document: unknown;
  ifMatch: number | undefined;
  ifNoneMatch: ChangePreconditions["ifNoneMatch"];
}

type Planned = Outcome<{
  compares: Compare[];
  operations: Operation[];
  results: AppliedResource[];
}>;

/**
 * Reads and writes config resources. Every write is checked as a whole (schemas, then the
 * references between resources) and committed in one store transaction that pins everything
 * it read, so the consistency check and the write cannot be separated by another writer.
 */
export class ConfigService {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #maxAttempts: number;
  readonly #options: ConfigServiceOptions;
  readonly #model: ConfigModel;
  readonly #catchUpMs: number;
  readonly #owner: ApplyOwner | undefined;
  readonly #names: NameOrder;

  constructor(store: Store, prefix: string, options: ConfigServiceOptions = {}) {
    this.#store = store;
    this.#prefix = prefix;
    this.#maxAttempts = options.maxAttempts ?? 5;
    this.#options = options;
    this.#catchUpMs = options.catchUpMs ?? 5_000;
    this.#owner =
      options.applyOwnerSlot === undefined ? undefined : newApplyOwner(options.applyOwnerSlot);
    this.#model = options.model ?? new ConfigModel({ store, prefix, logger: QUIET });
    if (this.#model.prefix !== prefix) {
      throw new RangeError(`the model follows prefix ${this.#model.prefix}, not ${prefix}`);
    }
    this.#names = new NameOrder(this.#model);
  }

  /** Stops the service's own model; a shared one is its owner's to stop. */
  async close(): Promise<void> {
    this.#names.close();
    if (this.#options.model === undefined) await this.#model.stop();
  }

  /**
   * Rolls back an apply whose control plane died half-way (see staged-apply.ts); the control
   * plane runs this periodically. Cheap when there is nothing to do.
   */
  recoverAbandonedApply(): Promise<Recovery> {
    return recoverAbandonedApply(this.#store, this.#prefix, configGuardKey(this.#prefix));
  }

  /**
   * The resources of one kind in name order (code units), from the first after `page.after`,
   * at most `page.limit` of them (default all), and how many come after those.
   */
  async list<K extends ResourceKind>(
    kind: K,
    page: ListPage = {},
  ): Promise<Outcome<{ revision: number; items: StoredResource<K>[]; remaining: number }>> {
    if (!RESOURCE_KINDS.includes(kind)) return unknownKind(kind);
    const limit = page.limit ?? Number.POSITIVE_INFINITY;
    try {
      const model = await this.#readableModel();
      if (model !== undefined) {
        const names = this.#names.names(kind);
        const start = firstAfter(names, page.after);
        const end = Math.min(names.length, start + limit);
        const items: StoredResource<K>[] = [];
        for (let index = start; index < end; index++) {
          const item = model.get(kind, names[index] as string);
          if (item !== undefined) items.push(item);
        }
        return { ok: true, revision: model.revision, items, remaining: names.length - end };
      }
      // During a big apply, the config as it was before it: never a half-applied one.
      const range = await readOutsideApply(
        this.#store,
        this.#prefix,
        kindPrefixes(this.#prefix, [kind]),
      );
      const read = readConfigState(this.#prefix, range);
      const all = [...(read.state[kind] as Map<string, StoredResource<K>>).values()].sort((a, b) =>
        byCodeUnits(a.name, b.name),
      );
      const start = firstAfter(
        all.map((item) => item.name),
        page.after,
      );
      const end = Math.min(all.length, start + limit);
      return {
        ok: true,
        revision: read.revision,
        items: all.slice(start, end),
        remaining: all.length - end,
      };
    } catch (error) {
      return storeUnavailable(error);
    }
  }

  async get<K extends ResourceKind>(
    kind: K,
    name: string,
  ): Promise<Outcome<{ resource: StoredResource<K> }>> {
    if (!RESOURCE_KINDS.includes(kind)) return unknownKind(kind);
    if (!RESOURCE_NAME.test(name)) return invalidName(name);
    let item: KeyValue | undefined;
    const key = resourceKey(this.#prefix, kind, name);
    try {
      const model = await this.#readableModel();
      if (model !== undefined) {
        const resource = model.get(kind, name);
        if (resource !== undefined) return { ok: true, resource };
        const reason = model.invalidReason(kind, name);
        return reason === undefined ? notFound(kind, name) : corrupt(kind, name, reason);
      }
      // That one key as it was before the big apply under way, never the keys it prefixes.
      item = await readKeyOutsideApply(this.#store, this.#prefix, key);
    } catch (error) {
      return storeUnavailable(error);
    }
    if (item === undefined) return notFound(kind, name);
    const read = readConfigState(this.#prefix, { revision: item.modRevision, items: [item] });
    const resource = (read.state[kind] as Map<string, StoredResource<K>>).get(name);
    if (resource === undefined) return corrupt(kind, name, read.invalid[0]?.reason ?? "unreadable");
    return { ok: true, resource };
  }

  /**
   * The model, for a read, once it holds every write through the API that the store holds (the
   * guard key every such write puts, and the apply gate, at the store's revisions: two small
   * reads), so a read after a write on any replica sees it. Undefined while a big apply is
   * half-way (the model then holds part of it) or when the model cannot catch up: read the
   * store instead.
   */
  async #readableModel(): Promise<ConfigModel | undefined> {
    const model = this.#model;
    await model.start();
    const keys = [configGuardKey(this.#prefix), applyGateKey(this.#prefix)];
    const stored = await Promise.all(keys.map((key) => this.#store.get(key)));
    let target = 0;
    keys.forEach((key, index) => {
      const now = stored[index]?.modRevision ?? 0;
      if (now === (model.keyValue(key)?.modRevision ?? 0)) return;
      // A key deleted meanwhile has no revision to read; its delete is the model's next event.
      target = Math.max(target, now === 0 ? model.revision + 1 : now);
    });
    if (target > 0 && !(await model.waitForRevision(target, this.#catchUpMs))) return undefined;
    return model.gate === undefined ? model : undefined;
  }

  /** The version of the config the model holds (see ConfigModel.configRevision). */
  get configRevision(): number {
    return this.#model.configRevision;
  }

  async apply(
    changes: readonly ResourceChange[],
    options: ApplyOptions = {},
  ): Promise<ApplyResult> {
    const parsed = parseChanges(this.#prefix, changes);
    if (!parsed.ok) return parsed;
    const pruneKinds =
      options.prune === true
        ? RESOURCE_KINDS
        : options.prune === false
          ? []
          : (options.prune ?? []);
    const dryRun = options.dryRun ?? false;
    const tooBig = oversizedDocument(parsed.changes, this.#store);
    if (tooBig !== undefined) return { ok: false, error: tooBig };
    const guard = configGuardKey(this.#prefix);
    const gateKey = applyGateKey(this.#prefix);
    const model = this.#model;
    try {
      // Writes are checked against the model, not a read of the config: the commit's revision
      // compares make sure nothing changed between what the model showed and the write.
      await model.start();
      for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
        const gate = model.gate;
        if (gate !== undefined) {
          // A gate whose control plane died is rolled back here rather than blocking writes:
          // once its lease is gone, or at once when that control plane was this one's
          // previous incarnation (killed and restarted half-way through the apply).
          const recovered =
            (await this.recoverAbandonedApply()) === "rolled-back" ||
            (this.#owner !== undefined &&
              (await takeOverOwnApply(this.#store, this.#prefix, guard, gate, this.#owner)));
          if (recovered) {
            await this.#catchUp([{ key: gateKey, modRevision: gate.revision }]);
            continue;
          }
          return {
            ok: false,
            error: clawgateError("CLAWGATE_STORE_CONFLICT", gateMessage(gate)),
          };
        }
        const revision = model.revision;
        const plan = planChanges(this.#prefix, parsed.changes, pruneKinds, model);
        const guardRead = { key: guard, modRevision: model.keyValue(guard)?.modRevision ?? 0 };
        if (!plan.ok) {
          // A refusal must not come from a model that lags the store (a write another control
          // plane just made): confirm what it was judged on, and judge again once caught up.
          // Every write through the API puts the guard key: if the store's is where the model
          // shows it, the model has every such write.
          if (await this.#catchUp([guardRead])) continue;
          return plan;
        }
        const refusal = options.vet?.(vettedChanges(this.#prefix, plan, model));
        if (refusal !== undefined) return { ok: false, error: refusal };
        if (dryRun || plan.operations.length === 0) {
          return { ok: true, revision, dryRun, results: plan.results };
        }
        const fence = rolloutFence(
          this.#prefix,
          model.keyValue(rolloutKey(this.#prefix)),
          options.endsRollout,
        );
        if (!fence.ok) {
          // Judged on the model: confirm it has the rollout as the store does, else judge again.
          const seen = model.keyValue(rolloutKey(this.#prefix))?.modRevision ?? 0;
          if (await this.#catchUp([{ key: rolloutKey(this.#prefix), modRevision: seen }])) continue;
          return fence;
        }
        const writes = plan.operations.map((operation) => ({
          key: operation.key,
          before: model.keyValue(operation.key)?.value,
        }));
        const also = alsoWrites(options.alsoWrite?.(plan.results, writes));
        const inOneCommit = [...plan.operations, ...also.ahead, ...also.commit];
        if (!fitsOneCommit({ ...plan, operations: inOneCommit }, this.#store)) {
          // Refused before the gate opens, so the store stays as it was.
          const closing = closingCommitProblem(also.commit, this.#store);
          if (closing !== undefined) return { ok: false, error: closing };
          const staged = await stagedApply({
            store: this.#store,
            prefix: this.#prefix,
            guard: guardRead,
            writes: [
              ...plan.operations.map((operation) => ({
                operation,
                before: model.keyValue(operation.key),
              })),
              ...also.ahead.map((operation) => ({ operation, before: undefined })),
            ],
            hooks: this.#options.stagedHooks,
            leaseTtlSeconds: this.#options.applyLeaseTtlSeconds,
            owner: this.#owner,
            closeOperations: also.commit,
            fences: [fence.compare],
          });
          if (!staged.ok && staged.reason === "conflict") {
            await this.#catchUp([guardRead, { key: gateKey, modRevision: 0 }, fence.compare]);
            continue;
          }
          if (!staged.ok) return storeUnavailable(staged.error, "the apply was rolled back");
          also.committed?.(staged.revision);
          await also.afterCommit?.();
          await model.waitForRevision(staged.revision, this.#catchUpMs);
          const results = plan.results.map((result) => {
            const key = resourceKey(this.#prefix, result.kind, result.name);
            const written = staged.revisions.get(key);
            return written === undefined ? result : { ...result, revision: written };
          });
          return { ok: true, revision: staged.revision, dryRun, results };
        }
        const compares = [
          ...plan.compares,
          guardRead,
          // No big apply may be in flight: its half-written keys are not to be built upon.
          { key: gateKey, modRevision: 0 },
          // The rollout as judged above: none started (or this one not ended) meanwhile.
          fence.compare,
        ];
        const operations: Operation[] = [
          ...inOneCommit,
          { type: "put", key: guard, value: String(revision) },
        ];
        const commit = await this.#store.commit(compares, operations);
        if (!commit.succeeded) {
          await this.#catchUp(compares);
          continue;
        }
        also.committed?.(commit.revision);
        await also.afterCommit?.();
        // The next request to this control plane (a GET, an If-Match write) must see this one.
        await model.waitForRevision(commit.revision, this.#catchUpMs);
        const results = plan.results.map((result) =>
          result.action === "unchanged" ? result : { ...result, revision: commit.revision },
        );
        return { ok: true, revision: commit.revision, dryRun, results };
      }
    } catch (error) {
      return storeUnavailable(error);
    }
    return {
      ok: false,
      error: clawgateError(
        "CLAWGATE_STORE_CONFLICT",
        `config changed concurrently ${this.#maxAttempts} times in a row; try again`,
      ),
    };
  }

  /**
   * Reads the keys of `seen` (each at the revision a write was judged on) from the store and,
   * where the store holds another revision, waits until the model has that one too. True when
   * the judgement was made on a model that lagged (judge again).
   */
  async #catchUp(seen: readonly Compare[]): Promise<boolean> {
    const judged = new Map(seen.map((compare) => [compare.key, compare.modRevision]));
    const keys = [...judged.keys()];
    const stored = await Promise.all(keys.map((key) => this.#store.get(key)));
    let target = 0;
    keys.forEach((key, index) => {
      const now = stored[index]?.modRevision ?? 0;
      if (now === judged.get(key)) return;
      // A key deleted meanwhile has no revision to read; its delete is the model's next event.
      target = Math.max(target, now === 0 ? this.#model.revision + 1 : now);
    });
    if (target === 0) return false;
    await this.#model.waitForRevision(target, this.#catchUpMs);
    return true;
  }
}

/** Which page of a kind's resources ConfigService.list answers. */
export interface ListPage {
  /** Start after this name (the continue token's); default the first. */
  after?: string;
  /** At most this many; default all. */
  limit?: number;
}

/** Validates names and documents of every change up front: they do not depend on the store. */
function parseChanges(
  prefix: string,
  changes: readonly ResourceChange[],
): Outcome<{ changes: ParsedChange[] }> {
  const problems: FieldProblem[] = [];
  const out: ParsedChange[] = [];
  const seen = new Set<string>();
  for (const change of changes) {
    const { kind, name } = change;
    if (!RESOURCE_KINDS.includes(kind)) return unknownKind(kind);
    if (!RESOURCE_NAME.test(name)) return invalidName(name);
    const key = resourceKey(prefix, kind, name);
    if (seen.has(key)) {
      problems.push({ kind, name, path: "", message: `${kind}/${name} is listed more than once` });
      continue;
    }
    seen.add(key);
    let value: string | undefined;
    let document: unknown;
    if (!("delete" in change)) {
      const result = validateResource(kind, name, change.document);
      if (!result.ok) {
        for (const { field, message } of result.problems) {
          problems.push({ kind, name, path: field, message });
        }
        continue;
      }
      document = result.document;
      value = JSON.stringify(result.document);
    }
    out.push({
      kind,
      name,
      key,
      value,
      document,
      ifMatch: change.ifMatch,
      ifNoneMatch: change.ifNoneMatch,
    });
  }
  if (problems.length > 0) {
    const [first] = problems;
    const where = first?.path ? `${first.path}: ` : "";
    const message =
      problems.length === 1
        ? `${first?.kind}/${first?.name} is invalid: ${where}${first?.message}`
        : `${problems.length} problems in the resources: ${problems
            .map((p) => `${p.kind}/${p.name}${p.path ? ` ${p.path}` : ""}: ${p.message}`)
            .join("; ")}`;
    return { ok: false, error: clawgateError("CLAWGATE_INVALID_RESOURCE", message, problems) };
  }
  return { ok: true, changes: out };
}

/**
 * Applies the changes to the config as the model holds it, as an overlay (nothing is copied),
 * and returns the transaction that makes them real, or why they are refused.
 */
function planChanges(
  prefix: string,
  changes: readonly ParsedChange[],
  pruneKinds: readonly ResourceKind[],
  model: ConfigModel,
): Planned {
  const after = overlayOf(model.state);
  const compares: Compare[] = [];
  const operations: Operation[] = [];
  const results: AppliedResource[] = [];
  const deleted: { kind: ResourceKind; name: string }[] = [];

  for (const change of changes) {
    const current = model.keyValue(change.key);
    const currentRevision = current?.modRevision ?? 0;
    if (change.ifMatch !== undefined && change.ifMatch !== currentRevision) {
      const now = current === undefined ? "does not exist" : `is at revision ${currentRevision}`;
      return {
        ok: false,
        error: clawgateError(
          "CLAWGATE_PRECONDITION_FAILED",
          `${change.kind}/${change.name} ${now}, not revision ${change.ifMatch}`,
          { kind: change.kind, name: change.name, revision: currentRevision },
        ),
      };
    }
    const noneMatch = change.ifNoneMatch;
    if (
      current !== undefined &&
      noneMatch !== undefined &&
      (noneMatch === "*" || noneMatch.includes(currentRevision))
    ) {
      const what = `${change.kind.slice(0, -1)} ${change.name}`;
      return {
        ok: false,
        error: clawgateError(
          "CLAWGATE_PRECONDITION_FAILED",
          noneMatch === "*"
            ? `${what} already exists (revision ${currentRevision}); If-None-Match: * only creates`
            : `${what} is at revision ${currentRevision}, which If-None-Match excludes`,
          { kind: change.kind, name: change.name, revision: currentRevision },
        ),
      };
    }
    // Pins what the preconditions were checked against: a concurrent write fails the commit.
    compares.push({ key: change.key, modRevision: currentRevision });
    const resources = after[change.kind] as ConfigOverlay[ResourceKind];
    if (change.value === undefined) {
      if (current === undefined) return notFound(change.kind, change.name);
      resources.delete(change.name);
      deleted.push({ kind: change.kind, name: change.name });
      operations.push({ type: "delete", key: change.key });
      results.push({
        kind: change.kind,
        name: change.name,
        action: "deleted",
        revision: currentRevision,
      });
      continue;
    }
    const stored = model.get(change.kind, change.name);
    (resources as { set(name: string, resource: StoredResource<ResourceKind>): void }).set(
      change.name,
      {
        name: change.name,
        document: change.document as ResourceDocuments[ResourceKind],
        revision: currentRevision,
      },
    );
    if (stored !== undefined && JSON.stringify(stored.document) === change.value) {
      results.push({
        kind: change.kind,
        name: change.name,
        action: "unchanged",
        revision: currentRevision,
      });
      continue;
    }
    operations.push({ type: "put", key: change.key, value: change.value });
    results.push({
      kind: change.kind,
      name: change.name,
      action: current === undefined ? "created" : "updated",
      revision: currentRevision,
    });
  }

  const named = new Set(changes.map((change) => change.key));
  for (const kind of pruneKinds) {
    const kindPrefix = `${prefix}${kind}/`;
    for (const item of model.keysOf(kind)) {
      if (named.has(item.key)) continue;
      const name = item.key.slice(kindPrefix.length);
      after[kind].delete(name);
      deleted.push({ kind, name });
      compares.push({ key: item.key, modRevision: item.modRevision });
      operations.push({ type: "delete", key: item.key });
      results.push({ kind, name, action: "deleted", revision: item.modRevision });
    }
  }

  const conflict =
    referenceConflict(model, after, deleted) ??
    tenantKeyConflict(model.state.tenants, after.tenants);
  if (conflict !== undefined) return { ok: false, error: conflict };
  return { ok: true, compares, operations, results };
}

/**
 * Refuses only problems the write introduces: a reference already broken by a key written
 * around the API must not block unrelated writes (the snapshot builder reports it instead).
 * Only what the write can break is checked: the routes and upstreams it puts, and the users of
 * the upstreams and breakers it deletes (the model keeps who references whom).
 */
function referenceConflict(
  model: ConfigModel,
  after: ConfigOverlay,
  deleted: readonly { kind: ResourceKind; name: string }[],
): ClawgateError | undefined {
  const routes = new Set(after.routes.changed.keys());
  const upstreams = new Set(after.upstreams.changed.keys());
  for (const { kind, name } of deleted) {
    if (kind === "upstreams") for (const route of model.routesUsing(name)) routes.add(route);
    if (kind === "breakers")
      for (const upstream of model.upstreamsUsing(name)) upstreams.add(upstream);
  }
  const scope = (view: {
    routes: { get(name: string): StoredResource<"routes"> | undefined };
    upstreams: { get(name: string): StoredResource<"upstreams"> | undefined };
    breakers: { has(name: string): boolean };
  }) =>
    scopedConsistencyProblems({
      routes: present([...routes].map((name) => view.routes.get(name))),
      upstreams: present([...upstreams].map((name) => view.upstreams.get(name))),
      upstreamNames: { has: (name) => view.upstreams.get(name) !== undefined },
      breakerNames: view.breakers,
    });
  const id = (p: ConsistencyProblem) => `${p.kind}/${p.name}/${p.field}/${p.message}`;
  const known = new Set(scope(model.state).map(id));
  const fresh = scope(after).filter((problem) => !known.has(id(problem)));
  if (fresh.length === 0) return undefined;

  // A dangling reference caused by a delete is explained from the deleted side, naming users.
  const details = new Map<ConsistencyProblem, ConsistencyProblem>();
  const messages: string[] = [];
  for (const { kind, name } of deleted) {
    if (kind !== "upstreams" && kind !== "breakers") continue;
    const users = fresh.filter((problem) => referencedTarget(after, problem) === `${kind}/${name}`);
    if (users.length === 0) continue;
    const target = `${kind.slice(0, -1)} ${name}`;
    for (const user of users) {
      const message = `${user.kind.slice(0, -1)} ${user.name} uses ${target}, which this change deletes`;
      details.set(user, { ...user, message });
    }
    const userKind = kind === "upstreams" ? "routes" : "upstreams";
    const names = users.map((user) => user.name).sort();
    messages.push(`${target} is used by ${userKind} ${names.join(", ")}`);
  }
  for (const problem of fresh) {
    if (!details.has(problem)) messages.push(problem.message);
  }
  return clawgateError(
    "CLAWGATE_REFERENCE_CONFLICT",
    messages.join("; "),
    fresh.map((problem) => details.get(problem) ?? problem),
  );
}

function present<T>(items: readonly (T | undefined)[]): T[] {
  return items.filter((item): item is T => item !== undefined);
}

/** The `kind/name` a consistency problem points at. */
function referencedTarget(state: ConfigOverlay, problem: ConsistencyProblem): string | undefined {
  if (problem.kind === "upstreams") {
    const upstream = state.upstreams.get(problem.name)?.document;
    return upstream === undefined ? undefined : `breakers/${upstream.breaker}`;
  }
  const route = state.routes.get(problem.name)?.document;
  if (route === undefined) return undefined;
  if (problem.field === "upstream") return `upstreams/${route.upstream}`;
  const index = Number(problem.field.split(".")[1]);
  const part = route.split?.[index];
  return part === undefined ? undefined : `upstreams/${part.upstream}`;
}

function unknownKind(kind: string): { ok: false; error: ClawgateError } {
  return {
    ok: false,
    error: clawgateError(
      "CLAWGATE_UNKNOWN_KIND",
      `unknown kind ${kind}; use one of ${RESOURCE_KINDS.join(", ")}`,
    ),
  };
}

function invalidName(name: string): { ok: false; error: ClawgateError } {
  return {
    ok: false,
    error: clawgateError(
      "CLAWGATE_INVALID_NAME",
      `name ${JSON.stringify(name)} must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit`,
    ),
  };
}

function corrupt(kind: ResourceKind, name: string, reason: string) {
  return {
    ok: false as const,
    error: clawgateError("CLAWGATE_CORRUPT_RESOURCE", `${kind}/${name} is invalid: ${reason}`),
  };
}

function notFound(kind: ResourceKind, name: string): { ok: false; error: ClawgateError } {
  return {
    ok: false,
    error: clawgateError("CLAWGATE_NOT_FOUND", `${kind.slice(0, -1)} ${name} not found`),
  };
}

function storeUnavailable(error: unknown, outcome?: string): { ok: false; error: ClawgateError } {
  const reason = error instanceof Error ? error.message : String(error);
  const suffix = outcome === undefined ? "" : `; ${outcome}`;
  return {
    ok: false,
    error: clawgateError("CLAWGATE_STORE_UNAVAILABLE", `config store failed: ${reason}${suffix}`),
  };
}

/** True when the plan, with the guard and gate compares, fits the store's transaction limits. */
function fitsOneCommit(plan: { compares: Compare[]; operations: Operation[] }, store: Store) {
  const limits = store.txnLimits;
  if (plan.compares.length + 2 > limits.maxOps) return false;
  if (plan.operations.length + 1 > limits.maxOps) return false;
  let bytes = 0;
  for (const operation of plan.operations) {
    bytes += Buffer.byteLength(operation.key);
    if (operation.type === "put") bytes += Buffer.byteLength(operation.value);
  }
  return bytes <= limits.maxBytes;
}

/**
 * The commit that closes a staged apply carries the journal's writes (audit event, history
 * entry, a rollout's state) besides the gate's three: each kept small (long lists go ahead in
 * chunks), but checked here so an apply that still would not fit is refused with 413 naming
 * the limit before anything is written, never rolled back with 503 after every batch landed.
 */
function closingCommitProblem(
  journal: readonly Operation[],
  store: Store,
): ClawgateError | undefined {
  const limits = store.txnLimits;
  // Gate and owner deleted, guard put (staged-apply.ts); its compares (the gate's and the
  // rollout fence) are a few small keys, inside the 1024 bytes allowed for framing.
  const operations = journal.length + 3;
  let bytes = 1024;
  for (const operation of journal) {
    bytes += Buffer.byteLength(operation.key);
    if (operation.type === "put") bytes += Buffer.byteLength(operation.value);
  }
  if (operations <= limits.maxOps && bytes <= limits.maxBytes) return undefined;
  return clawgateError(
    "CLAWGATE_PAYLOAD_TOO_LARGE",
    `this apply's closing commit would carry ${operations} operations and ${bytes} bytes of journal; the store takes at most ${limits.maxOps} operations and ${limits.maxBytes} bytes per commit (etcd --max-txn-ops, --max-request-bytes)`,
  );
}

/**
 * One document must fit a transaction together with its previous version (the undo record of
 * a staged apply carries both), so half of what the store takes per commit is the limit.
 */
function oversizedDocument(
  changes: readonly ParsedChange[],
  store: Store,
): ClawgateError | undefined {
  const limit = Math.floor(store.txnLimits.maxBytes / 2);
  for (const change of changes) {
    if (change.value === undefined) continue;
    const size = writeBytes({
      operation: { type: "put", key: change.key, value: change.value },
      before: undefined,
    });
    if (size <= limit) continue;
    return clawgateError(
      "CLAWGATE_PAYLOAD_TOO_LARGE",
      `${change.kind}/${change.name} is ${size} bytes stored; one resource may be at most ${limit} bytes`,
    );
  }
  return undefined;
}
