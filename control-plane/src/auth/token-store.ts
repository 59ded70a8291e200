import { createHash, randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { z } from "zod";
import { type ClawgateError, clawgateError, type Outcome } from "../resources/errors.js";
import { Informer, type InformerBatch } from "../store/informer.js";
import type { KeyValue, Operation, Store } from "../store/store.js";
import { type Caller, ROLES, type Role } from "./roles.js";

/** Name the bootstrap token (CLAWGATE_ADMIN_TOKEN) goes by in logs and the audit journal. */
export const BOOTSTRAP_TOKEN_NAME = "bootstrap";

/** What the audit journal and history name a change made with no token (an open app). */
export const ANONYMOUS_CALLER_NAME = "anonymous";

/** Names no stored token may take: each already means someone else in the journal. */
const RESERVED_TOKEN_NAMES: ReadonlyMap<string, string> = new Map([
  [BOOTSTRAP_TOKEN_NAME, "CLAWGATE_ADMIN_TOKEN"],
  [ANONYMOUS_CALLER_NAME, "changes made without a token"],
]);

/** A token as stored: never the secret, only its SHA-256. */
const storedTokenSchema = z.object({
  role: z.enum(ROLES),
  upstreams: z.array(z.string()).default([]),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: z.string(),
  createdBy: z.string().optional(),
});
type StoredToken = z.infer<typeof storedTokenSchema>;

/** A token as GET /v1/tokens shows it. */
export interface TokenView {
  name: string;
  role: Role;
  upstreams: string[];
  createdAt: string;
  createdBy?: string;
}

interface KnownToken {
  caller: Caller;
  /** SHA-256 of the secret, hex. */
  digest: string;
  view: TokenView;
}

export interface TokenStoreOptions {
  store: Store;
  /** Key prefix with its trailing slash; tokens live under `{prefix}tokens/`. */
  prefix: string;
  /** The bootstrap token, always role admin; default none. */
  bootstrapToken?: string;
  logger?: Logger;
}

export function tokensPrefix(prefix: string): string {
  return `${prefix}tokens/`;
}

function sha256(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** Logs nothing: for a token store built without a logger (tests). */
const SILENT = { debug() {}, info() {}, warn() {} };

/**
 * Named bearer tokens with roles, stored hashed under `{prefix}tokens/{name}` (outside every
 * config kind's prefix, so the snapshot builder never sees them). Requests are checked against
 * a copy in memory, loaded at start and kept current by a watch on the prefix, so checking a
 * token costs no store read. Every replica watches, so a revoke on one is seen by all.
 */
export class TokenStore {
  readonly #store: Store;
  readonly #prefix: string;
  readonly #logger: Logger | undefined;
  readonly #bootstrap: KnownToken | undefined;
  readonly #informer: Informer;
  /** Tokens by name, for list and revoke. */
  readonly #tokens = new Map<string, KnownToken>();
  /** The same tokens by the SHA-256 of their secret, for authenticate. */
  readonly #byDigest = new Map<string, KnownToken>();
  readonly #forgotten = new Set<(name: string) => void>();

  constructor(options: TokenStoreOptions) {
    this.#store = options.store;
    this.#prefix = tokensPrefix(options.prefix);
    this.#logger = options.logger;
    if (options.bootstrapToken !== undefined) {
      const caller: Caller = { name: BOOTSTRAP_TOKEN_NAME, role: "admin", upstreams: [] };
      this.#bootstrap = {
        caller,
        digest: sha256(options.bootstrapToken),
        view: { name: BOOTSTRAP_TOKEN_NAME, role: "admin", upstreams: [], createdAt: "" },
      };
    }
    // The shared list-then-watch loop: a compacted or broken watch is relisted and handed over
    // as the difference, so a token revoked meanwhile is still forgotten.
    this.#informer = new Informer({
      store: options.store,
      prefixes: [this.#prefix],
      name: "tokens",
      logger: options.logger ?? SILENT,
      onBatch: (batch) => this.#apply(batch),
    });
  }

  /** Reads every token and follows changes from then on; rejects if the first read fails. */
  start(): Promise<void> {
    return this.#informer.start();
  }

  stop(): Promise<void> {
    return this.#informer.stop();
  }

  /**
   * The caller a bearer secret belongs to, or undefined. Looked up by the secret's SHA-256:
   * the digest of a guess says nothing about any stored secret, so a map lookup leaks nothing a
   * constant-time compare would hide, and the cost does not grow with the number of tokens.
   */
  authenticate(secret: string): Caller | undefined {
    const digest = sha256(secret);
    if (this.#bootstrap !== undefined && digest === this.#bootstrap.digest) {
      return this.#bootstrap.caller;
    }
    return this.#byDigest.get(digest)?.caller;
  }

  /**
   * Calls `listener` with a token's name when it stops being valid here: revoked on this replica
   * or, through the watch, on another (or its stored value turned unreadable). Returns the
   * unsubscribe.
   */
  onForget(listener: (name: string) => void): () => void {
    this.#forgotten.add(listener);
    return () => {
      this.#forgotten.delete(listener);
    };
  }

  list(): TokenView[] {
    return [...this.#tokens.values()]
      .map((token) => token.view)
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Creates a token and answers its secret: the only time anyone sees it. */
  async create(
    name: string,
    role: Role,
    upstreams: readonly string[],
    createdBy: string | undefined,
    /** Written in the same commit (the audit event); default none. */
    also: readonly Operation[] = [],
  ): Promise<Outcome<{ token: string; revision: number }>> {
    const reservedFor = RESERVED_TOKEN_NAMES.get(name);
    if (reservedFor !== undefined) {
      return fail(
        clawgateError(
          "CLAWGATE_INVALID_REQUEST",
          `token name ${name} is reserved for ${reservedFor}; choose another`,
        ),
      );
    }
    if (role === "registrar" && upstreams.length === 0) {
      return fail(
        clawgateError(
          "CLAWGATE_INVALID_REQUEST",
          "upstreams: a registrar token needs at least one upstream it may register nodes in",
        ),
      );
    }
    if (role !== "registrar" && upstreams.length > 0) {
      return fail(
        clawgateError(
          "CLAWGATE_INVALID_REQUEST",
          `upstreams: only a registrar token is limited to upstreams; role ${role} is not`,
        ),
      );
    }
    // 32 random bytes; the prefix makes a leaked token easy to recognise in a secret scanner.
    const token = `cgt_${randomBytes(32).toString("base64url")}`;
    const stored: StoredToken = {
      role,
      upstreams: [...upstreams],
      sha256: sha256(token),
      createdAt: new Date().toISOString(),
      ...(createdBy === undefined ? {} : { createdBy }),
    };
    const key = `${this.#prefix}${name}`;
    const commit = await this.#guard(() =>
      this.#store.commit(
        [{ key, modRevision: 0 }],
        [{ type: "put", key, value: JSON.stringify(stored) }, ...also],
      ),
    );
    if (!commit.ok) return commit;
    if (!commit.value.succeeded) {
      return fail(
        clawgateError("CLAWGATE_STORE_CONFLICT", `token ${name} already exists; revoke it first`),
      );
    }
    // Known at once here, so the secret works on this replica as soon as it is answered.
    this.#remember(name, known(name, stored));
    return { ok: true, token, revision: commit.value.revision };
  }

  /** Deletes a token; requests carrying it are refused from then on. */
  async revoke(
    name: string,
    /** Written in the same commit (the audit event); default none. */
    also: readonly Operation[] = [],
  ): Promise<Outcome<{ revision: number }>> {
    const key = `${this.#prefix}${name}`;
    const current = await this.#guard(() => this.#store.get(key));
    if (!current.ok) return current;
    const existing = current.value;
    if (existing === undefined) {
      return fail(clawgateError("CLAWGATE_NOT_FOUND", `token ${name} not found`));
    }
    const commit = await this.#guard(() =>
      this.#store.commit(
        [{ key, modRevision: existing.modRevision }],
        [{ type: "delete", key }, ...also],
      ),
    );
    if (!commit.ok) return commit;
    if (!commit.value.succeeded) {
      return fail(clawgateError("CLAWGATE_STORE_CONFLICT", `token ${name} changed; try again`));
    }
    this.#forget(name);
    return { ok: true, revision: commit.value.revision };
  }

  #apply(batch: InformerBatch): void {
    for (const { key, current } of batch.changes) {
      const name = key.slice(this.#prefix.length);
      const parsed = current === undefined ? undefined : this.#parse(current);
      if (parsed === undefined) this.#forget(name);
      else this.#remember(name, parsed);
    }
  }

  #remember(name: string, token: KnownToken): void {
    const before = this.#tokens.get(name);
    this.#drop(name);
    this.#tokens.set(name, token);
    this.#byDigest.set(token.digest, token);
    // The same name with another secret (revoked and created again): the old one's streams end.
    if (before !== undefined && before.digest !== token.digest) this.#tell(name);
  }

  #forget(name: string): void {
    if (this.#drop(name)) this.#tell(name);
  }

  #drop(name: string): boolean {
    const token = this.#tokens.get(name);
    if (token === undefined) return false;
    this.#tokens.delete(name);
    this.#byDigest.delete(token.digest);
    return true;
  }

  #tell(name: string): void {
    for (const listener of this.#forgotten) listener(name);
  }

  #parse(item: KeyValue): KnownToken | undefined {
    const name = item.key.slice(this.#prefix.length);
    let json: unknown;
    try {
      json = JSON.parse(item.value);
    } catch {
      json = undefined;
    }
    const parsed = storedTokenSchema.safeParse(json);
    if (!parsed.success) {
      // Never the value: it holds a hash that should not spread to log files.
      this.#logger?.warn({ token: name }, "stored token is invalid and is ignored");
      return undefined;
    }
    return known(name, parsed.data);
  }

  /** The store's answer, or its failure as a catalog error instead of a thrown one. */
  async #guard<T>(run: () => Promise<T>): Promise<Outcome<{ value: T }>> {
    try {
      return { ok: true, value: await run() };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return fail(clawgateError("CLAWGATE_STORE_UNAVAILABLE", `config store failed: ${reason}`));
    }
  }
}

function known(name: string, stored: StoredToken): KnownToken {
  const view: TokenView = {
    name,
    role: stored.role,
    upstreams: stored.upstreams,
    createdAt: stored.createdAt,
    ...(stored.createdBy === undefined ? {} : { createdBy: stored.createdBy }),
  };
  return {
    caller: { name, role: stored.role, upstreams: stored.upstreams },
    digest: stored.sha256,
    view,
  };
}

function fail(error: ClawgateError): { ok: false; error: ClawgateError } {
  return { ok: false, error };
}
