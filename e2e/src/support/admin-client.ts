/** Resource collections of the admin API, as they appear in its paths. */
export type ResourceCollection = "upstreams" | "routes" | "breakers" | "tenants";

export interface AdminResponse<T = unknown> {
  status: number;
  /** The written key's store revision, from the ETag header, when the CP sent one. */
  revision: number | undefined;
  body: T;
}

export interface SnapshotStatusBody {
  version: number;
  published: boolean;
  publishedVersion?: number | null;
  reason?: string;
  [field: string]: unknown;
}

export interface DataPlaneItem {
  nodeId: string;
  state: "SYNCED" | "SYNCING" | "STALE" | "NACKED" | "DISCONNECTED";
  appliedVersion: number;
  /** The control-plane replica it streams from; absent while disconnected. */
  replica?: string;
  [field: string]: unknown;
}

export interface ApplyResource {
  kind: "upstream" | "route" | "breaker" | "tenant";
  name: string;
  spec: unknown;
}

export class AdminApiError extends Error {
  override name = "AdminApiError";
  constructor(
    message: string,
    readonly status: number,
    readonly body: unknown,
  ) {
    super(message);
  }
}

/** The control plane's admin API as a user sees it: JSON over HTTP with a bearer token. */
export class AdminClient {
  /**
   * The newest store revision a config write through this client produced (put, delete, apply).
   * Every snapshot published after that write has at least this version, so a wait for
   * convergence can start from it instead of accepting whatever version a data plane and the
   * control plane happen to agree on first (often the one from before the write).
   */
  lastConfigRevision = 0;

  /**
   * @param baseUrl e.g. http://127.0.0.1:9180 (no trailing slash)
   * @param token the admin bearer token
   */
  constructor(
    readonly baseUrl: string,
    readonly token: string,
  ) {}

  /** Any request; never throws on an HTTP error status, only on a transport failure. */
  async request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<AdminResponse<T>> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch {
      // Not JSON: keep the text so an error message can show it.
    }
    return {
      status: response.status,
      revision: parseRevision(response.headers.get("etag")),
      body: parsed as T,
    };
  }

  /** Like request, but an answer outside 2xx throws with the method, path and body. */
  async call<T = unknown>(method: string, path: string, body?: unknown): Promise<AdminResponse<T>> {
    const response = await this.request<T>(method, path, body);
    if (response.status < 200 || response.status > 299) {
      throw new AdminApiError(
        `${method} ${path} answered ${response.status}: ${JSON.stringify(response.body)}`,
        response.status,
        response.body,
      );
    }
    return response;
  }

  async put(collection: ResourceCollection, name: string, spec: unknown): Promise<AdminResponse> {
    return this.noteConfigWrite(await this.call("PUT", `/v1/${collection}/${name}`, spec));
  }

  get(collection: ResourceCollection, name: string): Promise<AdminResponse> {
    return this.call("GET", `/v1/${collection}/${name}`);
  }

  async delete(collection: ResourceCollection, name: string): Promise<AdminResponse> {
    return this.noteConfigWrite(await this.call("DELETE", `/v1/${collection}/${name}`));
  }

  putUpstream(name: string, spec: unknown): Promise<AdminResponse> {
    return this.put("upstreams", name, spec);
  }

  putRoute(name: string, spec: unknown): Promise<AdminResponse> {
    return this.put("routes", name, spec);
  }

  /** Several resources in one transaction: one store revision for all of them. */
  async apply(resources: ApplyResource[], options: { dryRun?: boolean; prune?: boolean } = {}) {
    const response = await this.call("POST", "/v1/apply", { resources, ...options });
    return options.dryRun === true ? response : this.noteConfigWrite(response);
  }

  /**
   * Remembers the revision a config write produced: the ETag of a put or delete, or the newest
   * revision among the resources an apply changed (an apply that changed nothing publishes no
   * snapshot, so its commit revision is no version to wait for).
   */
  private noteConfigWrite<T>(response: AdminResponse<T>): AdminResponse<T> {
    const results = (response.body as { results?: unknown } | undefined)?.results;
    const revision = Array.isArray(results)
      ? Math.max(
          0,
          ...results
            .filter((r: { action?: unknown }) => r.action !== "unchanged")
            .map((r: { revision?: unknown }) => (typeof r.revision === "number" ? r.revision : 0)),
        )
      : response.revision;
    if (revision !== undefined && revision > this.lastConfigRevision) {
      this.lastConfigRevision = revision;
    }
    return response;
  }

  async snapshot(): Promise<SnapshotStatusBody> {
    return (await this.call<SnapshotStatusBody>("GET", "/v1/snapshot")).body;
  }

  async dataplanes(): Promise<DataPlaneItem[]> {
    return (await this.call<{ items: DataPlaneItem[] }>("GET", "/v1/dataplanes")).body.items;
  }
}

/** ETag carries the key's revision: "17", W/"17" or 17. */
export function parseRevision(etag: string | null): number | undefined {
  if (etag === null) return undefined;
  const match = /(\d+)/.exec(etag);
  return match === null ? undefined : Number(match[1]);
}
