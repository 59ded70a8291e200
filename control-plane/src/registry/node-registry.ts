import { RESOURCE_NAME, upstreamSchema } from "@clawgate/proto";
import { resourceKey } from "../resources/config-state.js";
import {
  type ClawgateError,
  clawgateError,
  fieldProblems,
  type Outcome,
} from "../resources/errors.js";
import type { KeyValue, Operation, Store } from "../store/store.js";
import type { GoneMarker } from "./gone-marker.js";
import { type MergedNode, mergeNodes } from "./merge-nodes.js";
import {
  parseRegistration,
  type RegisteredNode,
  type RegistrationInput,
  readRegistryNodes,
  registrationSchema,
  type StoredRegistration,
} from "./registered-node.js";
import { registryGoneKey, registryKey, registryPrefix } from "./registry-key.js";

export interface NodeRegistryOptions {
  store: Store;
  /** Key prefix with its trailing slash (e.g. "/clawgate/"). */
  prefix: string;
  /** Commits tried before giving up with CLAWGATE_STORE_CONFLICT; default 5. */
  maxAttempts?: number;
  /** Wall clock for registeredAt and remaining TTLs; default Date.now. */
  clock?: () => number;
}

export type RegisterAction = "created" | "updated" | "renewed";

export interface RegisterResult {
  action: RegisterAction;
  node: RegisteredNode;
  /** Seconds until the lease expires without another renewal. */
  expiresInSeconds: number;
  /** Store revision after the write; for a plain renewal, the node key's revision. */
  revision: number;
}

/** One node of an upstream as `GET /v1/upstreams/{name}/nodes` lists it. */
export interface ListedNode extends MergedNode {
  /** False for a registered node whose address the upstream document already lists. */
  active: boolean;
  ttlSeconds?: number;
  /**
   * Seconds left on the lease when this control plane granted or renewed it; null when
   * another control plane did (etcd is not asked, to keep listing one range read).
   */
  expiresInSeconds?: number | null;
  registeredAt?: string;
}

/**
 * Nodes that register themselves with a TTL lease, one lease per registration. Writes are
 * guarded like config writes: the commit compares the upstream's key, so a registration can
 * never land on an upstream deleted between the check and the write.
 */
export class NodeRegistry {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #maxAttempts: number;
  readonly #clock: () => number;
  /** When each lease this instance granted or refreshed runs out, for remaining-TTL answers. */
  readonly #leaseDeadlines = new Map<string, number>();

  constructor(options: NodeRegistryOptions) {
    this.#store = options.store;
    this.#prefix = options.prefix;
    this.#maxAttempts = options.maxAttempts ?? 5;
    this.#clock = options.clock ?? Date.now;
  }

  /**
   * Registers or renews node `id` of `upstream`. The same address, weight and TTL only refresh
   * the lease (no write, so no new snapshot); a changed address or weight rewrites the key on
   * the same lease; a changed TTL, or a lease that already expired, moves the key to a new one.
   */
  async register(
    upstream: string,
    id: string,
    input: RegistrationInput,
    /** Writes to commit with a registration or change (the audit event); not on a renewal. */
    alsoWrite?: (action: "created" | "updated") => Operation[],
  ): Promise<Outcome<RegisterResult>> {
    const names = checkNames(upstream, id);
    if (names !== undefined) return { ok: false, error: names };
    const parsed = registrationSchema.safeParse(input);
    if (!parsed.success) {
      const problems = fieldProblems(parsed.error.issues);
      return {
        ok: false,
        error: clawgateError(
          "CLAWGATE_INVALID_REQUEST",
          `registration is invalid: ${problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`,
          problems,
        ),
      };
    }
    const wanted = parsed.data;
    const upstreamKey = resourceKey(this.#prefix, "upstreams", upstream);
    const key = registryKey(this.#prefix, upstream, id);
    try {
      for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
        const [upstreamKv, existing] = await Promise.all([
          this.#store.get(upstreamKey),
          this.#store.get(key),
        ]);
        if (upstreamKv === undefined) return upstreamNotFound(upstream);
        const stored = existing === undefined ? undefined : parseRegistration(existing.value);
        const current = stored?.ok === true ? stored.registration : undefined;

        let lease: string | undefined;
        if (existing?.lease !== undefined && current?.ttlSeconds === wanted.ttlSeconds) {
          if (await this.#refresh(existing.lease, wanted.ttlSeconds)) lease = existing.lease;
        }
        if (lease !== undefined && existing !== undefined && current !== undefined) {
          if (current.address === wanted.address && current.weight === wanted.weight) {
            return {
              ok: true,
              action: "renewed",
              node: this.#node(upstream, id, current, existing),
              expiresInSeconds: wanted.ttlSeconds,
              revision: existing.modRevision,
            };
          }
        }

        const granted = lease === undefined;
        if (lease === undefined) lease = await this.#grant(wanted.ttlSeconds);
        const value: StoredRegistration = {
          address: wanted.address,
          weight: wanted.weight,
          ttlSeconds: wanted.ttlSeconds,
          registeredAt: current?.registeredAt ?? new Date(this.#clock()).toISOString(),
        };
        const commit = await this.#store.commit(
          [
            { key: upstreamKey, modRevision: upstreamKv.modRevision },
            { key, modRevision: existing?.modRevision ?? 0 },
          ],
          [
            { type: "put", key, value: JSON.stringify(value), lease },
            ...(alsoWrite?.(existing === undefined ? "created" : "updated") ?? []),
          ],
        );
        if (!commit.succeeded) {
          if (granted) await this.#revokeQuietly(lease);
          continue;
        }
        if (existing?.lease !== undefined && existing.lease !== lease) {
          // The old lease holds no key any more; ending it now saves etcd a TTL of bookkeeping.
          await this.#revokeQuietly(existing.lease);
        }
        const written: KeyValue = {
          key,
          value: JSON.stringify(value),
          modRevision: commit.revision,
          createRevision: commit.revision,
          lease,
        };
        return {
          ok: true,
          action: existing === undefined ? "created" : "updated",
          node: this.#node(upstream, id, value, written),
          expiresInSeconds: wanted.ttlSeconds,
          revision: commit.revision,
        };
      }
    } catch (error) {
      return storeUnavailable(error);
    }
    return {
      ok: false,
      error: clawgateError(
        "CLAWGATE_STORE_CONFLICT",
        `node ${id} of upstream ${upstream} changed concurrently ${this.#maxAttempts} times in a row; try again`,
      ),
    };
  }

  /**
   * Removes node `id` now. The key's delete and a "deregistered" gone marker commit together,
   * so no control plane journals this as an expiry; the lease is revoked afterwards. Works
   * for an upstream that no longer exists, to clear its leftovers.
   */
  async deregister(
    upstream: string,
    id: string,
    /** Writes to commit with the deregistration (the audit event); default none. */
    also: readonly Operation[] = [],
  ): Promise<Outcome<{ revision: number }>> {
    const names = checkNames(upstream, id);
    if (names !== undefined) return { ok: false, error: names };
    const key = registryKey(this.#prefix, upstream, id);
    const marker: GoneMarker = { reason: "deregistered" };
    try {
      for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
        const existing = await this.#store.get(key);
        if (existing === undefined) {
          return {
            ok: false,
            error: clawgateError(
              "CLAWGATE_NOT_FOUND",
              `node ${id} is not registered with upstream ${upstream}`,
            ),
          };
        }
        const commit = await this.#store.commit(
          [{ key, modRevision: existing.modRevision }],
          [
            { type: "delete", key },
            {
              type: "put",
              key: registryGoneKey(this.#prefix, upstream, id),
              value: JSON.stringify(marker),
            },
            ...also,
          ],
        );
        if (!commit.succeeded) continue;
        if (existing.lease !== undefined) await this.#revokeQuietly(existing.lease);
        return { ok: true, revision: commit.revision };
      }
    } catch (error) {
      return storeUnavailable(error);
    }
    return {
      ok: false,
      error: clawgateError(
        "CLAWGATE_STORE_CONFLICT",
        `node ${id} of upstream ${upstream} changed concurrently; try again`,
      ),
    };
  }

  /** The upstream's nodes from both sources, as data planes get them, plus shadowed ones. */
  async list(upstream: string): Promise<Outcome<{ revision: number; nodes: ListedNode[] }>> {
    if (!RESOURCE_NAME.test(upstream))
      return { ok: false, error: invalidName("upstream", upstream) };
    try {
      const upstreamKv = await this.#store.get(resourceKey(this.#prefix, "upstreams", upstream));
      if (upstreamKv === undefined) return upstreamNotFound(upstream);
      let json: unknown;
      try {
        json = JSON.parse(upstreamKv.value);
      } catch {
        json = undefined;
      }
      const document = upstreamSchema.safeParse(json);
      if (!document.success) {
        return {
          ok: false,
          error: clawgateError("CLAWGATE_CORRUPT_RESOURCE", `upstreams/${upstream} is invalid`),
        };
      }
      const range = await this.#store.range(registryPrefix(this.#prefix, upstream));
      const registered = readRegistryNodes(this.#prefix, range.items).nodes.get(upstream) ?? [];
      const merged = mergeNodes(document.data.nodes, registered);
      const byId = new Map(registered.map((node) => [node.id, node]));
      const nodes: ListedNode[] = merged.nodes.map((node) => {
        const source = node.id === undefined ? undefined : byId.get(node.id);
        return source === undefined ? { ...node, active: true } : this.#listed(source, true);
      });
      for (const node of merged.shadowed) nodes.push(this.#listed(node, false));
      return { ok: true, revision: range.revision, nodes };
    } catch (error) {
      return storeUnavailable(error);
    }
  }

  #listed(node: RegisteredNode, active: boolean): ListedNode {
    const listed: ListedNode = {
      address: node.address,
      weight: node.weight,
      source: "registry",
      id: node.id,
      active,
      ttlSeconds: node.ttlSeconds,
      expiresInSeconds: this.#remaining(node.lease),
      registeredAt: node.registeredAt,
    };
    return listed;
  }

  #remaining(lease: string | undefined): number | null {
    const deadline = lease === undefined ? undefined : this.#leaseDeadlines.get(lease);
    if (deadline === undefined) return null;
    return Math.max(0, Math.ceil((deadline - this.#clock()) / 1000));
  }

  #node(
    upstream: string,
    id: string,
    registration: StoredRegistration,
    kv: KeyValue,
  ): RegisteredNode {
    const node: RegisteredNode = { upstream, id, ...registration, revision: kv.modRevision };
    if (kv.lease !== undefined) node.lease = kv.lease;
    return node;
  }

  async #grant(ttlSeconds: number): Promise<string> {
    const lease = await this.#store.grantLease(ttlSeconds);
    this.#track(lease, ttlSeconds);
    return lease;
  }

  async #refresh(lease: string, ttlSeconds: number): Promise<boolean> {
    const alive = await this.#store.refreshLease(lease);
    if (alive) this.#track(lease, ttlSeconds);
    else this.#leaseDeadlines.delete(lease);
    return alive;
  }

  #track(lease: string, ttlSeconds: number): void {
    const now = this.#clock();
    this.#leaseDeadlines.set(lease, now + ttlSeconds * 1000);
    // Forget leases that ran out, so nodes that come and go do not grow the map.
    if (this.#leaseDeadlines.size > 1_024) {
      for (const [id, deadline] of this.#leaseDeadlines) {
        if (deadline < now) this.#leaseDeadlines.delete(id);
      }
    }
  }

  async #revokeQuietly(lease: string): Promise<void> {
    this.#leaseDeadlines.delete(lease);
    // Best effort: a lease left behind holds no key and ends by itself after its TTL.
    await this.#store.revokeLease(lease).catch(() => undefined);
  }
}

function checkNames(upstream: string, id: string): ClawgateError | undefined {
  if (!RESOURCE_NAME.test(upstream)) return invalidName("upstream", upstream);
  if (!RESOURCE_NAME.test(id)) return invalidName("node id", id);
  return undefined;
}

function invalidName(what: string, name: string): ClawgateError {
  return clawgateError(
    "CLAWGATE_INVALID_NAME",
    `${what} ${JSON.stringify(name)} must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit`,
  );
}

function upstreamNotFound(upstream: string): { ok: false; error: ClawgateError } {
  return {
    ok: false,
    error: clawgateError("CLAWGATE_NOT_FOUND", `upstream ${upstream} not found`),
  };
}

function storeUnavailable(error: unknown): { ok: false; error: ClawgateError } {
  const reason = error instanceof Error ? error.message : String(error);
  return {
    ok: false,
    error: clawgateError("CLAWGATE_STORE_UNAVAILABLE", `config store failed: ${reason}`),
  };
}
