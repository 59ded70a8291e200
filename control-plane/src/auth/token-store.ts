import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Logger } from "pino";
import { z } from "zod";
import { type ClawgateError, clawgateError, type Outcome } from "../resources/errors.js";
import type { KeyValue, Operation, Store, Watch, WatchEvent } from "../store/store.js";
import { type Caller, ROLES, type Role } from "./roles.js";

/** Name the bootstrap token (CLAWGATE_ADMIN_TOKEN) goes by in logs and the audit journal. */
export const BOOTSTRAP_TOKEN_NAME = "bootstrap";

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
  digest: Buffer;
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

function sha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

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
  #tokens = new Map<string, KnownToken>();
  #watch: Watch | undefined;
  #stopped = false;

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
  }

  /** Reads every token and watches for changes from then on. */
  async start(): Promise<void> {
    const range = await this.#store.range(this.#prefix);
    const tokens = new Map<string, KnownToken>();
    for (const item of range.items) {
      const known = this.#parse(item);
      if (known !== undefined) tokens.set(known.caller.name, known);
    }
    this.#tokens = tokens;
    this.#watch = await this.#store.watch(this.#prefix, range.revision + 1, {
      onEvents: (events) => this.#apply(events),
      onError: (error) => {
        // The watch ended for good (compaction): read everything again and watch anew.
        this.#logger?.warn({ err: error }, "token watch failed; reloading tokens");
        if (!this.#stopped) void this.start().catch(() => undefined);
      },
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#watch?.close();
  }

  /**
   * The caller a bearer secret belongs to, or undefined. Every known digest is compared in
   * constant time and the loop never stops early, so timing says nothing about which token
   * (or how much of one) a guess matched.
   */
  authenticate(secret: string): Caller | undefined {
    const digest = sha256(secret);
    let found: Caller | undefined;
    if (this.#bootstrap !== undefined && timingSafeEqual(digest, this.#bootstrap.digest)) {
      found = this.#bootstrap.caller;
    }
    for (const token of this.#tokens.values()) {
      if (timingSafeEqual(digest, token.digest)) found = token.caller;
    }
    return found;
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
    if (name === BOOTSTRAP_TOKEN_NAME) {
      return fail(
        clawgateError(
          "CLAWGATE_INVALID_REQUEST",
          `token name ${BOOTSTRAP_TOKEN_NAME} is reserved for CLAWGATE_ADMIN_TOKEN; choose another`,
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
      sha256: sha256(token).toString("hex"),
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
    this.#tokens.set(name, known(name, stored));
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
    this.#tokens.delete(name);
    return { ok: true, revision: commit.value.revision };
  }

  #apply(events: readonly WatchEvent[]): void {
    for (const event of events) {
      const name = event.key.slice(this.#prefix.length);
      if (event.type === "delete" || event.value === undefined) {
        this.#tokens.delete(name);
        continue;
      }
      const known = this.#parse({
        key: event.key,
        value: event.value,
        modRevision: event.modRevision,
        createRevision: event.modRevision,
      });
      if (known === undefined) this.#tokens.delete(name);
      else this.#tokens.set(name, known);
    }
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
    digest: Buffer.from(stored.sha256, "hex"),
    view,
  };
}

function fail(error: ClawgateError): { ok: false; error: ClawgateError } {
  return { ok: false, error };
}
