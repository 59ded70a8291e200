import { RESOURCE_KINDS, type ResourceKind, validateResource } from "@clawgate/proto";
import { coveredRevision } from "../registry/gone-marker.js";
import {
  parseRegistration,
  type RegisteredNode,
  type RegistryNodes,
} from "../registry/registered-node.js";
import { parseRegistryKey, registryGonePrefix, registryPrefix } from "../registry/registry-key.js";
import { type ApplyGate, applyGateKey, findGate } from "../resources/apply-gate.js";
import { configGuardKey } from "../resources/config-guard.js";
import {
  type ConfigState,
  emptyConfigState,
  resourceKey,
  type StoredResource,
} from "../resources/config-state.js";
import { rolloutKey } from "../rollout/rollout-state.js";
import { Informer, type InformerBatch, type InformerLogger } from "../store/informer.js";
import type { KeyValue, Store } from "../store/store.js";
import { listedVersion } from "./listed-version.js";

/** A resource by kind and name: "routes/api". */
export type ResourceId = `${ResourceKind}/${string}`;

export function resourceId(kind: ResourceKind, name: string): ResourceId {
  return `${kind}/${name}`;
}

/** What one batch changed, as the snapshot builder needs it. */
export interface ModelChange {
  revision: number;
  /**
   * Resources whose document, validity or (for upstreams) registered nodes changed. A resource
   * named here may no longer exist: it was deleted.
   */
  resources: ReadonlySet<ResourceId>;
  /** The apply gate was set, changed or lifted. */
  gate: boolean;
  /** The progressive rollout's key changed (written in the same commit as its config). */
  rollout: boolean;
  /** A relist replaced the state: consumers that keep history should start over. */
  replaced: boolean;
}

export type ModelListener = (change: ModelChange) => void;

export interface ConfigModelOptions {
  store: Store;
  /** Key prefix the config lives under, with its trailing slash (e.g. "/clawgate/"). */
  prefix: string;
  logger: InformerLogger;
  /** Relist backoff after a watch failure; defaults as the informer's (100 ms to 5 s). */
  retryMinMs?: number;
  retryMaxMs?: number;
}

/**
 * The config in memory, fed by one informer: every resource parsed and default-filled, the
 * registered nodes per upstream, the apply gate, and who references whom. Each event parses
 * only the key it changed, so following a change costs the change, not the config. The
 * snapshot builder and the config service's write checks both read it instead of the store.
 */
export class ConfigModel {
  readonly prefix: string;
  readonly #informer: Informer;
  readonly #state: ConfigState = emptyConfigState();
  /** Documents under a config key that do not parse, by key, with why. */
  readonly #invalid = new Map<string, { kind: ResourceKind; name: string; reason: string }>();
  readonly #registry = new Map<string, Map<string, RegisteredNode>>();
  readonly #registryInvalid = new Map<string, string>();
  /** Upstream name -> routes that send to it (named in `upstream` or `split`), existing or not. */
  readonly #routesByUpstream = new Map<string, Set<string>>();
  /** Breaker name -> upstreams that name it. */
  readonly #upstreamsByBreaker = new Map<string, Set<string>>();
  readonly #listeners = new Set<ModelListener>();
  readonly #gateKey: string;
  readonly #rolloutKey: string;
  readonly #registryBase: string;
  readonly #guardKey: string;
  readonly #goneBase: string;
  /** Keys a snapshot is built from: the config kinds, the registry, the apply gate. */
  readonly #contentPrefixes: readonly string[];
  readonly #store: Store;
  #gate: ApplyGate | undefined;
  /** Revision of the newest change to what a snapshot holds; see configRevision. */
  #configRevision = 0;
  #started: Promise<void> | undefined;

  constructor(options: ConfigModelOptions) {
    this.prefix = options.prefix;
    this.#gateKey = applyGateKey(options.prefix);
    this.#rolloutKey = rolloutKey(options.prefix);
    this.#registryBase = registryPrefix(options.prefix);
    this.#guardKey = configGuardKey(options.prefix);
    this.#goneBase = registryGonePrefix(options.prefix);
    this.#store = options.store;
    this.#contentPrefixes = [
      ...RESOURCE_KINDS.map((kind) => `${options.prefix}${kind}/`),
      this.#registryBase,
      this.#gateKey,
    ];
    this.#informer = new Informer({
      store: options.store,
      // The config kinds, the registry and the coordination keys of writes; never the journal
      // or health reports, which share the prefix and can dwarf the config.
      prefixes: [
        ...this.#contentPrefixes,
        this.#guardKey,
        // Deregistrations and expiries: the revision of a registry delete a list cannot show.
        this.#goneBase,
        // Seen in the same batch as the config it was committed with, so a replica pins the
        // data planes outside a rollout's canaries before it rebuilds (rollout-controller.ts).
        this.#rolloutKey,
      ],
      onBatch: (batch) => this.#apply(batch),
      logger: options.logger,
      name: "config",
      ...(options.retryMinMs === undefined ? {} : { retryMinMs: options.retryMinMs }),
      ...(options.retryMaxMs === undefined ? {} : { retryMaxMs: options.retryMaxMs }),
    });
  }

  /**
   * Lists the store and follows it, and numbers the config it read (configRevision); rejects if
   * the first list fails. Calling it again returns the same promise.
   */
  start(): Promise<void> {
    if (this.#started === undefined) {
      const started = this.#informer.start().then(() => this.#numberTheList());
      this.#started = started;
      // A first list that failed is tried again by the next caller, as the informer's is.
      started.catch(() => {
        if (this.#started === started) this.#started = undefined;
      });
    }
    return this.#started;
  }

  stop(): Promise<void> {
    return this.#informer.stop();
  }

  /** Calls `listener` after each batch of changes is in the model; returns the unsubscribe. */
  onChange(listener: ModelListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Store revision the model is at: of the newest write seen under the prefix, any key. */
  get revision(): number {
    return this.#informer.revision;
  }

  /**
   * Revision of the newest change to what a snapshot is built from (a config document or a
   * registered node written or deleted, the apply gate set or lifted): the version of the config
   * the model holds. The shared records, quota counters, journal and health reports under the
   * same prefix do not move it, so every replica numbers one config alike and a write that
   * changes none of it makes no new version. Only grows; at least 1 once started.
   */
  get configRevision(): number {
    return this.#configRevision;
  }

  /** Every valid resource by kind. Read only: the model changes it in place on each event. */
  get state(): Readonly<ConfigState> {
    return this.#state;
  }

  get<K extends ResourceKind>(kind: K, name: string): StoredResource<K> | undefined {
    return this.#state[kind].get(name) as StoredResource<K> | undefined;
  }

  /** Why the document of `kind/name` is unusable, if it is. */
  invalidReason(kind: ResourceKind, name: string): string | undefined {
    return this.#invalid.get(resourceKey(this.prefix, kind, name))?.reason;
  }

  /** Every unusable config document, by key. */
  invalidDocuments(): ReadonlyMap<string, { kind: ResourceKind; name: string; reason: string }> {
    return this.#invalid;
  }

  /** The raw key as the model last saw it: its value and mod revision, for revision compares. */
  keyValue(key: string): KeyValue | undefined {
    return this.#informer.get(key);
  }

  /** Every raw key of one kind, valid or not. */
  keysOf(kind: ResourceKind): IterableIterator<KeyValue> {
    return this.#informer.entries(`${this.prefix}${kind}/`);
  }

  /** Registered nodes of `upstream`, sorted by node id. */
  registeredNodes(upstream: string): RegisteredNode[] {
    const nodes = this.#registry.get(upstream);
    if (nodes === undefined) return [];
    return [...nodes.values()].sort((a, b) => compare(a.id, b.id));
  }

  /** Registered nodes of every upstream (for a full snapshot). */
  registryNodes(): RegistryNodes {
    const out = new Map<string, RegisteredNode[]>();
    for (const upstream of this.#registry.keys()) out.set(upstream, this.registeredNodes(upstream));
    return out;
  }

  /** Routes that name upstream `name`, whether it exists or not. */
  routesUsing(upstream: string): ReadonlySet<string> {
    return this.#routesByUpstream.get(upstream) ?? NONE;
  }

  /** Upstreams that name breaker policy `name`, whether it exists or not. */
  upstreamsUsing(breaker: string): ReadonlySet<string> {
    return this.#upstreamsByBreaker.get(breaker) ?? NONE;
  }

  /** The apply gate, while a big apply holds it. */
  get gate(): ApplyGate | undefined {
    return this.#gate;
  }

  /** Resolves true once the model has seen `revision` (a write of a watched key); false on timeout. */
  waitForRevision(revision: number, timeoutMs: number): Promise<boolean> {
    return this.#informer.waitForRevision(revision, timeoutMs);
  }

  /**
   * Numbers the config of the first list (start()): by the newest change it shows, checked
   * against the store's history (listed-version.ts). Events that came in meanwhile numbered
   * themselves exactly, and only ever raise the number.
   */
  async #numberTheList(): Promise<void> {
    let count = 0;
    let newest = this.#configRevision;
    for (const prefix of this.#contentPrefixes) {
      for (const item of this.#informer.entries(prefix)) {
        count++;
        newest = Math.max(newest, item.modRevision);
      }
    }
    newest = Math.max(newest, this.#informer.get(this.#guardKey)?.modRevision ?? 0);
    for (const marker of this.#informer.entries(this.#goneBase)) {
      newest = Math.max(newest, coveredRevision(marker));
    }
    const at = this.#informer.revision;
    const version = await listedVersion({
      store: this.#store,
      contentPrefixes: this.#contentPrefixes,
      at,
      count,
      newest,
    });
    this.#configRevision = Math.max(this.#configRevision, version);
  }

  #apply(batch: InformerBatch): void {
    const resources = new Set<ResourceId>();
    let gate = false;
    let rollout = false;
    /** Newest revision among the changes to what a snapshot holds. */
    let changed = 0;
    for (const { key, current, revision } of batch.changes) {
      if (key === this.#rolloutKey) {
        rollout = true;
        continue;
      }
      if (key === this.#gateKey) {
        this.#gate = current === undefined ? undefined : findGate(this.prefix, [current]);
        gate = true;
        changed = Math.max(changed, revision);
        continue;
      }
      if (key === this.#guardKey || key.startsWith(this.#goneBase)) continue;
      if (key.startsWith(this.#registryBase)) {
        const upstream = this.#applyRegistration(key, current);
        if (upstream !== undefined) {
          resources.add(resourceId("upstreams", upstream));
          changed = Math.max(changed, revision);
        }
        continue;
      }
      const id = this.#applyDocument(key, current);
      if (id !== undefined) {
        resources.add(id);
        changed = Math.max(changed, revision);
      }
    }
    if (!batch.listed) {
      // A watch event names its own revision, a delete's included: exact on every replica.
      this.#configRevision = Math.max(this.#configRevision, changed);
    } else if (batch.replaced && changed > 0) {
      // A relist (the watch broke) that found the content changed: when, within the gap, is
      // not known, and a number the content had before would name two configs. The list's
      // revision is one no other content has. The first list is numbered by start().
      this.#configRevision = Math.max(this.#configRevision, batch.revision);
    }
    const change: ModelChange = {
      revision: batch.revision,
      resources,
      gate,
      rollout,
      replaced: batch.replaced,
    };
    for (const listener of this.#listeners) listener(change);
  }

  /** Parses only this key's document and updates the references it makes. */
  #applyDocument(key: string, current: KeyValue | undefined): ResourceId | undefined {
    const rest = key.slice(this.prefix.length);
    const slash = rest.indexOf("/");
    const kind = rest.slice(0, slash) as ResourceKind;
    if (slash < 0 || !RESOURCE_KINDS.includes(kind)) return undefined;
    const name = rest.slice(slash + 1);
    const resources = this.#state[kind] as Map<string, StoredResource<ResourceKind>>;
    this.#unreference(kind, resources.get(name));
    resources.delete(name);
    this.#invalid.delete(key);
    if (current !== undefined) {
      const parsed = parseDocument(kind, name, current.value);
      if (parsed.ok) {
        const stored = { name, document: parsed.document, revision: current.modRevision };
        resources.set(name, stored);
        this.#reference(kind, stored);
      } else {
        this.#invalid.set(key, { kind, name, reason: parsed.reason });
      }
    }
    return resourceId(kind, name);
  }

  #applyRegistration(key: string, current: KeyValue | undefined): string | undefined {
    const where = parseRegistryKey(this.prefix, key);
    if (where === undefined) return undefined;
    let nodes = this.#registry.get(where.upstream);
    nodes?.delete(where.id);
    this.#registryInvalid.delete(key);
    if (current !== undefined) {
      const parsed = parseRegistration(current.value);
      if (parsed.ok) {
        const node: RegisteredNode = {
          ...where,
          ...parsed.registration,
          revision: current.modRevision,
        };
        if (current.lease !== undefined) node.lease = current.lease;
        if (nodes === undefined) {
          nodes = new Map();
          this.#registry.set(where.upstream, nodes);
        }
        nodes.set(where.id, node);
      } else {
        // A broken registration is that node's problem, not a reason to hold back the config.
        this.#registryInvalid.set(key, parsed.reason);
      }
    }
    if (nodes !== undefined && nodes.size === 0) this.#registry.delete(where.upstream);
    return where.upstream;
  }

  #reference(kind: ResourceKind, stored: StoredResource<ResourceKind>): void {
    for (const [index, target] of this.#targetsOf(kind, stored)) {
      let users = index.get(target);
      if (users === undefined) {
        users = new Set();
        index.set(target, users);
      }
      users.add(stored.name);
    }
  }

  /** The reverse-reference entries one resource makes: [which index, target name]. */
  *#targetsOf(
    kind: ResourceKind,
    stored: StoredResource<ResourceKind>,
  ): Generator<[Map<string, Set<string>>, string]> {
    if (kind === "routes") {
      const route = stored.document as StoredResource<"routes">["document"];
      if (route.upstream !== undefined && route.upstream !== "") {
        yield [this.#routesByUpstream, route.upstream];
      }
      for (const part of route.split ?? []) yield [this.#routesByUpstream, part.upstream];
    } else if (kind === "upstreams") {
      const upstream = stored.document as StoredResource<"upstreams">["document"];
      yield [this.#upstreamsByBreaker, upstream.breaker];
    }
  }

  #unreference(kind: ResourceKind, stored: StoredResource<ResourceKind> | undefined): void {
    if (stored === undefined) return;
    for (const [index, target] of this.#targetsOf(kind, stored)) {
      const users = index.get(target);
      users?.delete(stored.name);
      if (users?.size === 0) index.delete(target);
    }
  }
}

const NONE: ReadonlySet<string> = new Set();

function parseDocument<K extends ResourceKind>(kind: K, name: string, value: string) {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    return { ok: false as const, reason: "not JSON" };
  }
  const parsed = validateResource(kind, name, json);
  if (parsed.ok) return { ok: true as const, document: parsed.document };
  const reason = parsed.problems
    .map(({ field, message }) => (field ? `${field}: ${message}` : message))
    .join("; ");
  return { ok: false as const, reason };
}

// Code-unit order, not localeCompare: snapshots must not depend on the host's locale.
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
