import { randomBytes } from "node:crypto";
import {
  type BreakerPolicy,
  type ConfigProblem,
  create,
  DEFAULT_BREAKER,
  DEFAULT_BREAKER_NAME,
  formatProblem,
  RESOURCE_KINDS,
  type ResourceKind,
  type Route,
  referenceProblems,
  routeProblems,
  SnapshotDeltaSchema,
  SnapshotSchema,
  type Tenant,
  type Upstream,
  upstreamProblems,
  validateSnapshot,
} from "@clawgate/proto";
import type { Logger } from "pino";
import { monotonicScheduler, type Scheduler } from "../remediation/scheduler.js";
import { resourceKey } from "../resources/config-state.js";
import type { Store } from "../store/store.js";
import { ConfigModel, type ModelChange, type ResourceId } from "./config-model.js";
import type { PublishedSnapshot } from "./published-snapshot.js";
import type { SnapshotStatus, SnapshotStatusSource } from "./snapshot-status.js";
import { toBreaker, toRoute, toTenant, toUpstream } from "./to-snapshot.js";

export type { PublishedSnapshot } from "./published-snapshot.js";
export type PublishListener = (published: PublishedSnapshot) => void;
export type StatusListener = (status: SnapshotStatus) => void;

type Problem = { key: string; message: string };

export type BuilderLogger = Pick<Logger, "debug" | "info" | "warn" | "error">;

export interface SnapshotBuilderOptions {
  store: Store;
  /** Key prefix the config lives under, with its trailing slash (e.g. "/clawgate/"). */
  prefix: string;
  logger: BuilderLogger;
  /**
   * The config model to build from, shared with the config service; default one of its own,
   * which start() starts and stop() stops.
   */
  model?: ConfigModel;
  /**
   * A change within this long of the last rebuild waits this long for more to settle, so a burst
   * costs one rebuild; a change after a quiet window rebuilds at once. Default 25 ms.
   */
  coalesceMs?: number;
  /** Longest a change waits for its rebuild under a steady stream of writes; default 250 ms. */
  maxDelayMs?: number;
  /** Names this control plane in nonces; default a random hex id. */
  instanceId?: string;
  /** Wall clock for createdAtMs and builtAt; default Date.now. */
  clock?: () => number;
  /**
   * Clock and timers of the coalescing (coalesceMs, maxDelayMs); default the monotonic clock and
   * real timers. Tests step a ManualScheduler instead of racing the machine.
   */
  pacer?: Scheduler;
  /** First delay before relisting after a watch failure (own model only); default 100 ms. */
  retryMinMs?: number;
  /** Cap on that delay as failures repeat (own model only); default 5 s. */
  retryMaxMs?: number;
}

/** The wire message of each kind, as the snapshot carries it. */
interface Messages {
  routes: Map<string, Route>;
  upstreams: Map<string, Upstream>;
  breakers: Map<string, BreakerPolicy>;
  tenants: Map<string, Tenant>;
}

const NO_COUNTS = { routes: 0, upstreams: 0, breakers: 0, tenants: 0 };
const DEFAULT_BREAKER_MESSAGE = toBreaker(DEFAULT_BREAKER_NAME, DEFAULT_BREAKER);

/**
 * Turns the config model into published snapshots, following each change rather than re-reading
 * the config: the wire message of every resource is cached and only those a change touched are
 * converted again; the checks a data plane would run (documents, references) are kept per
 * resource and re-run for the changed resources and those that reference them. So a one-route
 * change costs one conversion and one check, plus the O(n) pointer copies that assemble the
 * whole snapshot. Each publish carries the delta from the previous one. A state with problems is
 * not published; the previous snapshot keeps being served and status() says why. Encoding is
 * left to the snapshot server.
 */
export class SnapshotBuilder implements SnapshotStatusSource {
  private readonly model: ConfigModel;
  private readonly ownsModel: boolean;
  private readonly prefix: string;
  private readonly logger: BuilderLogger;
  private readonly coalesceMs: number;
  private readonly maxDelayMs: number;
  private readonly instanceId: string;
  private readonly clock: () => number;
  private readonly listeners = new Set<PublishListener>();
  private readonly statusListeners = new Set<StatusListener>();

  private readonly messages: Messages = {
    routes: new Map(),
    upstreams: new Map(),
    breakers: new Map(),
    tenants: new Map(),
  };
  /** Names of each kind in snapshot order; undefined once a name came or went. */
  private readonly sortedNames: Record<ResourceKind, string[] | undefined> = {
    routes: [],
    upstreams: [],
    breakers: [],
    tenants: [],
  };
  /** Problems by resource key; only resources that have some. */
  private readonly problems = new Map<string, Problem[]>();
  /** Resources changed in the model but not yet converted and checked. */
  private readonly pending = new Set<ResourceId>();
  /** Resources converted since the last publish: what the next delta holds. */
  private readonly unpublished = new Set<ResourceId>();
  /** Names in the last published snapshot, to tell a removal from a name that never went out. */
  private readonly publishedNames: Record<ResourceKind, Set<string>> = {
    routes: new Set(),
    upstreams: new Set(),
    breakers: new Set(),
    tenants: new Set(),
  };
  /** The next publish goes out whole, without a delta, and is validated as a whole. */
  private whole = true;

  private published: PublishedSnapshot | undefined;
  private lastStatus: SnapshotStatus = {
    version: 0,
    published: false,
    publishedVersion: null,
    reason: "no config read yet",
    counts: NO_COUNTS,
  };
  /** Problems behind the last refusal, to log each distinct refusal once at warn. */
  private lastReason = "";
  /** ISO time the published snapshot was built. */
  private builtAt: string | undefined;
  /** Config revision of the newest rebuild; everything up to it is reflected in lastStatus. */
  private readRevision = 0;
  /** True once the model was read: /readyz waits for it. */
  private storeRead = false;
  /** True once the model has numbered its first read: no rebuild before (start()). */
  private modelStarted = false;
  private firstPendingAt: number | undefined;
  /** When the last rebuild ran (pacer clock); a change long after it needs no coalescing. */
  private lastRebuildAt = Number.NEGATIVE_INFINITY;
  /** The pending rebuild is due at once (a change after a quiet window): later ones join it. */
  private rebuildingAtOnce = false;
  private readonly pacer: Scheduler;
  /** Cancels the pending coalesced rebuild, if one is scheduled. */
  private cancelTimer: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(options: SnapshotBuilderOptions) {
    this.prefix = options.prefix;
    this.logger = options.logger;
    this.coalesceMs = options.coalesceMs ?? 25;
    this.maxDelayMs = options.maxDelayMs ?? 250;
    this.instanceId = options.instanceId ?? randomBytes(4).toString("hex");
    this.clock = options.clock ?? Date.now;
    this.pacer = options.pacer ?? monotonicScheduler;
    if (!(this.coalesceMs >= 0 && this.maxDelayMs >= this.coalesceMs)) {
      throw new RangeError(
        `maxDelayMs (${this.maxDelayMs}) must be at least coalesceMs (${this.coalesceMs}) and both non-negative`,
      );
    }
    this.ownsModel = options.model === undefined;
    this.model =
      options.model ??
      new ConfigModel({
        store: options.store,
        prefix: options.prefix,
        logger: options.logger,
        ...(options.retryMinMs === undefined ? {} : { retryMinMs: options.retryMinMs }),
        ...(options.retryMaxMs === undefined ? {} : { retryMaxMs: options.retryMaxMs }),
      });
    if (this.model.prefix !== this.prefix) {
      throw new RangeError(
        `the model follows prefix ${this.model.prefix}, not the builder's ${this.prefix}`,
      );
    }
  }

  /** Builds the first snapshot, then follows the model; rejects if the first read fails. */
  async start(): Promise<void> {
    this.unsubscribe = this.model.onChange((change) => this.onChange(change));
    await this.model.start();
    this.modelStarted = true;
    this.startOver();
    this.rebuild();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.unsubscribe?.();
    if (this.ownsModel) await this.model.stop();
  }

  status(): SnapshotStatus {
    return structuredClone(this.lastStatus);
  }

  hasReadStore(): boolean {
    return this.storeRead;
  }

  current(): PublishedSnapshot | undefined {
    return this.published;
  }

  /** Calls `listener` after each publish; returns the unsubscribe function. */
  onPublish(listener: PublishListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Calls `listener` after each rebuild of a newer revision, published or not. */
  onStatus(listener: StatusListener): () => void {
    this.statusListeners.add(listener);
    return () => {
      this.statusListeners.delete(listener);
    };
  }

  private onChange(change: ModelChange): void {
    if (change.replaced) {
      // A relist may have skipped any number of events: convert and check everything again,
      // and send the next snapshot whole, since no delta from the last one is known to be right.
      this.startOver();
    } else {
      for (const id of change.resources) this.pending.add(id);
    }
    // Only a change to what a snapshot holds moves the model's config revision; one the last
    // rebuild already covered, or a write to any other key, needs no rebuild. A relist that
    // found nothing changed leaves everything pending: the next change goes out whole.
    if (this.modelStarted && this.model.configRevision > this.readRevision) this.schedule();
  }

  /** Forgets every cached message and check; the next rebuild converts the whole model. */
  private startOver(): void {
    for (const kind of RESOURCE_KINDS) this.messages[kind].clear();
    this.problems.clear();
    this.unpublished.clear();
    this.pending.clear();
    for (const kind of RESOURCE_KINDS) {
      this.sortedNames[kind] = undefined;
      for (const name of this.model.state[kind].keys()) this.pending.add(`${kind}/${name}`);
    }
    for (const { kind, name } of this.model.invalidDocuments().values()) {
      this.pending.add(`${kind}/${name}`);
    }
    // The built-in default policy is in every snapshot unless a document overrides it.
    this.pending.add(`breakers/${DEFAULT_BREAKER_NAME}`);
    this.whole = true;
  }

  /**
   * A change after a quiet coalesceMs is rebuilt in the next turn (changes of the same turn join
   * it): a lone write reaches data planes without waiting out a window it does not need, which
   * was most of a one-route change's latency. A change during a burst debounces by coalesceMs,
   * but never past maxDelayMs after the first pending change.
   */
  private schedule(): void {
    if (this.stopped) return;
    if (this.rebuildingAtOnce && this.cancelTimer !== undefined) return;
    const now = this.pacer.now();
    if (this.cancelTimer === undefined && now - this.lastRebuildAt >= this.coalesceMs) {
      this.rebuildingAtOnce = true;
      this.cancelTimer = this.pacer.after(0, () => this.flush());
      return;
    }
    this.rebuildingAtOnce = false;
    this.firstPendingAt ??= now;
    const due = Math.min(now + this.coalesceMs, this.firstPendingAt + this.maxDelayMs);
    this.cancelTimer?.();
    this.cancelTimer = this.pacer.after(Math.max(0, due - now), () => this.flush());
  }

  private flush(): void {
    this.cancelTimer = undefined;
    this.rebuildingAtOnce = false;
    if (this.stopped) return;
    this.firstPendingAt = undefined;
    try {
      this.rebuild();
    } catch (error) {
      this.logger.error({ err: error }, "snapshot rebuild failed");
    }
  }

  private rebuild(): void {
    if (this.stopped || !this.modelStarted) return;
    this.lastRebuildAt = this.pacer.now();
    // The version: the revision of the newest change to what the snapshot holds, the same on
    // every replica, not the revision the model reached (other keys share the prefix).
    const revision = this.model.configRevision;
    // While a big apply holds the gate, the config keys hold part of it: publish nothing until
    // the gate's deletion brings the rebuild it waited for. Changes stay pending meanwhile.
    const gate = this.model.gate;
    if (gate !== undefined) {
      this.readRevision = Math.max(this.readRevision, revision);
      this.logger.debug({ apply: gate.id, revision }, "apply in progress; snapshot not rebuilt");
      return;
    }
    const first = !this.storeRead;
    this.storeRead = true;
    // The first read is always judged: an empty config is a valid snapshot data planes need.
    if (!first && revision <= this.readRevision) return;
    this.readRevision = revision;
    for (const id of this.pending) this.refresh(id);
    this.pending.clear();

    const state = this.model.state;
    const counts = {
      routes: state.routes.size,
      upstreams: state.upstreams.size,
      breakers: state.breakers.size,
      tenants: state.tenants.size,
    };
    const problems = this.currentProblems();
    const candidate = problems.length === 0 ? this.prepare(revision) : undefined;
    if (candidate === undefined) this.refuse(revision, problems, counts);
    else if ("problems" in candidate) this.refuse(revision, candidate.problems, counts);
    else this.publish(candidate, counts);
    for (const listener of this.statusListeners) {
      try {
        listener(this.status());
      } catch (error) {
        this.logger.error({ err: error }, "snapshot status listener failed");
      }
    }
  }

  /** Converts one changed resource again and re-checks it and whatever references it. */
  private refresh(id: ResourceId): void {
    const slash = id.indexOf("/");
    const kind = id.slice(0, slash) as ResourceKind;
    const name = id.slice(slash + 1);
    const messages = this.messages[kind] as Map<string, unknown>;
    const had = messages.has(name);
    const message = this.convert(kind, name);
    if (message === undefined) messages.delete(name);
    else messages.set(name, message);
    if (had !== (message !== undefined)) this.sortedNames[kind] = undefined;
    this.unpublished.add(id);
    this.check(kind, name);
    // Whether a reference holds depends only on its target existing: re-check the users.
    if (kind === "upstreams") {
      for (const route of this.model.routesUsing(name)) this.check("routes", route);
    } else if (kind === "breakers" && name !== DEFAULT_BREAKER_NAME && name !== "") {
      for (const upstream of this.model.upstreamsUsing(name)) this.check("upstreams", upstream);
    }
  }

  private convert(kind: ResourceKind, name: string): unknown {
    switch (kind) {
      case "routes": {
        const stored = this.model.get("routes", name);
        return stored && toRoute(name, stored.document);
      }
      case "upstreams": {
        const stored = this.model.get("upstreams", name);
        // Registrations of an upstream that does not exist are orphans of a deleted one.
        return stored && toUpstream(name, stored.document, this.model.registeredNodes(name));
      }
      case "breakers": {
        const stored = this.model.get("breakers", name);
        if (stored === undefined && name === DEFAULT_BREAKER_NAME) return DEFAULT_BREAKER_MESSAGE;
        return stored && toBreaker(name, stored.document);
      }
      case "tenants": {
        const stored = this.model.get("tenants", name);
        return stored && toTenant(name, stored.document);
      }
    }
  }

  /** Re-runs the checks of one resource: its document, its references, what a DP would refuse. */
  private check(kind: ResourceKind, name: string): void {
    const key = resourceKey(this.prefix, kind, name);
    const found: Problem[] = [];
    const invalid = this.model.invalidReason(kind, name);
    if (invalid !== undefined) found.push({ key, message: `invalid document: ${invalid}` });
    const state = this.model.state;
    if (kind === "routes") {
      const route = this.messages.routes.get(name);
      const document = state.routes.get(name)?.document;
      if (route !== undefined && document !== undefined) {
        const broken = referenceProblems({
          routes: [{ name, upstream: document.upstream, split: document.split }],
          upstreams: [],
          upstreamNames: state.upstreams,
          breakerNames: state.breakers,
        });
        found.push(...broken.map((problem) => this.consistency(problem)));
        found.push(...routeProblems(route).map((problem) => this.refusal(problem)));
      }
    } else if (kind === "upstreams") {
      const upstream = this.messages.upstreams.get(name);
      const document = state.upstreams.get(name)?.document;
      if (upstream !== undefined && document !== undefined) {
        const broken = referenceProblems({
          routes: [],
          upstreams: [{ name, breaker: document.breaker }],
          upstreamNames: state.upstreams,
          breakerNames: state.breakers,
        });
        found.push(...broken.map((problem) => this.consistency(problem)));
        found.push(...upstreamProblems(upstream).map((problem) => this.refusal(problem)));
      }
    }
    if (found.length === 0) this.problems.delete(key);
    else this.problems.set(key, found);
  }

  /** Every open problem, ordered by key so one state always reads the same. */
  private currentProblems(): Problem[] {
    if (this.problems.size === 0) return [];
    const keys = [...this.problems.keys()].sort(compare);
    return keys.flatMap((key) => this.problems.get(key) ?? []);
  }

  /** A broken reference, worded as the admin API's 409 says it. */
  private consistency(problem: ConfigProblem): Problem {
    return {
      key: resourceKey(this.prefix, problem.kind as ResourceKind, problem.name),
      message: `${problem.kind.slice(0, -1)} ${problem.name} ${problem.message}`,
    };
  }

  /** A problem under the key of the document it names; the config prefix for the snapshot. */
  private refusal(problem: ConfigProblem): Problem {
    const key =
      problem.kind === "snapshot" || problem.name === ""
        ? this.prefix
        : resourceKey(this.prefix, problem.kind as ResourceKind, problem.name);
    return { key, message: `data planes would refuse the snapshot: ${formatProblem(problem)}` };
  }

  private refuse(version: number, problems: Problem[], counts: SnapshotStatus["counts"]): void {
    const served = this.published?.version;
    const reason =
      `config at revision ${version} has ${problems.length} problem${problems.length === 1 ? "" : "s"}` +
      (served === undefined ? "; nothing published yet" : `; still serving version ${served}`);
    this.lastStatus = {
      version,
      published: false,
      publishedVersion: served ?? null,
      reason,
      problems,
      counts,
    };
    if (this.lastStatus.publishedVersion !== null && this.builtAt !== undefined) {
      this.lastStatus.builtAt = this.builtAt;
    }
    // The same problems on every unrelated write would flood the log; say it once per change.
    const signature = JSON.stringify(problems);
    const fields = { version, publishedVersion: served ?? null, problems };
    if (signature === this.lastReason)
      this.logger.debug(fields, `snapshot not published: ${reason}`);
    else this.logger.warn(fields, `snapshot not published: ${reason}`);
    this.lastReason = signature;
  }

  /**
   * Assembles the snapshot from the cached messages and the delta from the previous publish.
   * The per-resource checks already ran; what is left is the stamp (a clock past 2^53 ms is
   * something no data plane accepts), and, for a whole snapshot (the first, or after a relist),
   * the shared validation of all of it, exactly as a data plane will run it.
   */
  private prepare(
    version: number,
  ): { published: PublishedSnapshot; builtAtMs: number } | { problems: Problem[] } {
    const nonce = `${this.instanceId}-${version}`;
    const now = this.clock();
    const stamp = { version: BigInt(version), nonce, createdAtMs: BigInt(now) };
    const snapshot = create(SnapshotSchema, stamp);
    snapshot.routes = this.ordered("routes");
    snapshot.upstreams = this.ordered("upstreams");
    snapshot.breakers = this.ordered("breakers");
    snapshot.tenants = this.ordered("tenants");
    const problems = validateSnapshot(this.whole ? snapshot : create(SnapshotSchema, stamp));
    if (problems.length > 0) return { problems: problems.map((p) => this.refusal(p)) };
    const delta = this.whole ? undefined : this.delta(stamp);
    return { published: { version, nonce, snapshot, delta }, builtAtMs: now };
  }

  /** The cached messages of one kind in name order (re-sorted only when a name came or went). */
  private ordered<K extends ResourceKind>(
    kind: K,
  ): Messages[K] extends Map<string, infer M> ? M[] : never {
    const messages = this.messages[kind] as Map<string, unknown>;
    let names = this.sortedNames[kind];
    if (names === undefined) {
      names = [...messages.keys()].sort(compare);
      this.sortedNames[kind] = names;
    }
    return names.map((name) => messages.get(name)) as never;
  }

  /** Resources converted since the last publish, whole; names that went out and are gone. */
  private delta(stamp: { version: bigint; nonce: string; createdAtMs: bigint }) {
    const delta = create(SnapshotDeltaSchema, {
      ...stamp,
      baseVersion: BigInt(this.published?.version ?? 0),
    });
    for (const id of [...this.unpublished].sort(compare)) {
      const slash = id.indexOf("/");
      const kind = id.slice(0, slash) as ResourceKind;
      const name = id.slice(slash + 1);
      const message = this.messages[kind].get(name);
      if (message !== undefined) {
        (delta[kind] as unknown[]).push(message);
      } else if (this.publishedNames[kind].has(name)) {
        removedList(delta, kind).push(name);
      }
    }
    return delta;
  }

  private publish(
    candidate: { published: PublishedSnapshot; builtAtMs: number },
    counts: SnapshotStatus["counts"],
  ): void {
    const { published, builtAtMs: now } = candidate;
    const { version } = published;
    this.rememberPublished(published);
    this.published = published;
    this.builtAt = new Date(now).toISOString();
    this.lastStatus = {
      version,
      published: true,
      publishedVersion: version,
      builtAt: this.builtAt,
      counts,
    };
    if (this.lastReason !== "") {
      this.logger.info({ version }, "config is consistent again; snapshot published");
    }
    this.lastReason = "";
    this.logger.debug(
      {
        version,
        ...counts,
        delta: published.delta === undefined ? null : this.unpublishedCount(published),
      },
      "snapshot published",
    );
    for (const listener of this.listeners) {
      try {
        listener(published);
      } catch (error) {
        this.logger.error({ err: error, version }, "snapshot publish listener failed");
      }
    }
  }

  /** Tracks which names went out, following the delta (or the whole snapshot) just published. */
  private rememberPublished(published: PublishedSnapshot): void {
    if (published.delta === undefined) {
      for (const kind of RESOURCE_KINDS) {
        this.publishedNames[kind] = new Set(published.snapshot[kind].map(({ name }) => name));
      }
    } else {
      for (const kind of RESOURCE_KINDS) {
        const names = this.publishedNames[kind];
        for (const { name } of published.delta[kind]) names.add(name);
        for (const name of removedList(published.delta, kind)) names.delete(name);
      }
    }
    this.unpublished.clear();
    this.whole = false;
  }

  private unpublishedCount(published: PublishedSnapshot): number {
    const delta = published.delta;
    if (delta === undefined) return 0;
    return RESOURCE_KINDS.reduce(
      (sum, kind) => sum + delta[kind].length + removedList(delta, kind).length,
      0,
    );
  }
}

function removedList(delta: PublishedSnapshot["delta"] & object, kind: ResourceKind): string[] {
  switch (kind) {
    case "routes":
      return delta.removedRoutes;
    case "upstreams":
      return delta.removedUpstreams;
    case "breakers":
      return delta.removedBreakers;
    case "tenants":
      return delta.removedTenants;
  }
}

// Code-unit order, not localeCompare: the order must not depend on the host's locale.
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
