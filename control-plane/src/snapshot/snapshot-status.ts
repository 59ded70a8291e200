/** What `GET /v1/snapshot` answers: the newest version seen and whether it went out. */
export interface SnapshotStatus {
  /** Version of the newest config the builder read: the revision of its newest change. */
  version: number;
  /** True when `version` is the snapshot being served to data planes. */
  published: boolean;
  /** Version data planes are being sent; null before the first publish. */
  publishedVersion: number | null;
  /** Why `version` was not published (a broken reference, an invalid document). */
  reason?: string;
  problems?: { key: string; message: string }[];
  /** ISO time the published snapshot was built. */
  builtAt?: string;
  counts: { routes: number; upstreams: number; breakers: number; tenants: number };
}

export interface SnapshotStatusSource {
  status(): SnapshotStatus;
  /**
   * True once a first read of the store completed, an empty store at revision 0 included.
   * When absent, `status().version > 0` stands in for it.
   */
  hasReadStore?(): boolean;
}
