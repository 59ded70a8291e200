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

  put(collection: ResourceCollection, name: string, spec: unknown): Promise<AdminResponse> {
    return this.call("PUT", `/v1/${collection}/${name}`, spec);
  }

  get(collection: ResourceCollection, name: string): Promise<AdminResponse> {
    return this.call("GET", `/v1/${collection}/${name}`);
  }

  delete(collection: ResourceCollection, name: string): Promise<AdminResponse> {
    return this.call("DELETE", `/v1/${collection}/${name}`);
  }

  putUpstream(name: string, spec: unknown): Promise<AdminResponse> {
    return this.put("upstreams", name, spec);
  }

  putRoute(name: string, spec: unknown): Promise<AdminResponse> {
    return this.put("routes", name, spec);
  }

  /** Several resources in one transaction: one store revision for all of them. */
  apply(resources: ApplyResource[], options: { dryRun?: boolean; prune?: boolean } = {}) {
    return this.call("POST", "/v1/apply", { resources, ...options });
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
