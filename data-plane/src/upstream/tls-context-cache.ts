import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import tls, { type SecureContext } from "node:tls";
import { fileStatKey } from "../file-watch/file-stat-key.js";
import type { ProbeTlsFiles } from "../health/prober/probe-protocol.js";

/** The files an upstream's `tls` names; "" for one it does not set. */
export interface TlsFilePaths {
  readonly caFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
}

/** One file as it was read: its path and the stat it had (inode, mtime, size). */
export interface TlsFileStat {
  readonly path: string;
  readonly stat: string;
}

/** A file set read once and parsed once, shared by every upstream and connection naming it. */
export interface TlsFileSet {
  /** What tls.connect uses instead of ca/cert/key strings (it would parse them each time). */
  readonly secureContext: SecureContext;
  /** The files' stats when read: changes with any of them (a renewal renamed over one, too). */
  readonly statKey: string;
  readonly files: readonly TlsFileStat[];
  /** Hash of the contents: pools built from other contents are not reused. */
  readonly contentHash: string;
  /** The PEM text for the probe thread, which builds its own context (threads cannot share one). */
  readonly pem: ProbeTlsFiles;
}

export type TlsFileProblem = { readonly field: string; readonly message: string };
export type TlsFileLoad =
  | { readonly ok: true; readonly value: TlsFileSet; readonly built: boolean }
  | { readonly ok: false; readonly problems: readonly TlsFileProblem[] };

const CERTIFICATE = "-----BEGIN CERTIFICATE-----";
const PRIVATE_KEY = "PRIVATE KEY-----";

/**
 * Reads each distinct set of TLS files once and builds its SecureContext once, until one of the
 * files changes (another inode, mtime or size). A CA bundle is about 220 KB and took 80 to 150 ms
 * to parse: per upstream per compile, 300 upstreams naming it froze the loop for 35 s, and per
 * connection it cost 30 ms of CPU. A stat per file is all a compile pays for a known set.
 */
export class TlsContextCache {
  /** By the paths (not their stats), so a renewed file replaces its set instead of piling up. */
  readonly #sets = new Map<string, TlsFileSet>();
  /** SecureContexts built so far; a compile weighs a build as a step of its own. */
  builds = 0;

  load(paths: TlsFilePaths): TlsFileLoad {
    const named: [field: string, path: string][] = [
      ["tls.caFile", paths.caFile],
      ["tls.clientCertFile", paths.clientCertFile],
      ["tls.clientKeyFile", paths.clientKeyFile],
    ];
    const problems: TlsFileProblem[] = [];
    const files: TlsFileStat[] = [];
    for (const [field, path] of named) {
      if (path === "") continue;
      try {
        const stat = statSync(path);
        // Taken before the read, so a write landing during it leaves a stat older than the file:
        // the watch sees the difference and reloads, never the reverse.
        files.push({ path, stat: fileStatKey(stat) });
      } catch (error) {
        problems.push({ field, message: `cannot read ${path} (${codeOf(error)})` });
      }
    }
    if (problems.length > 0) return { ok: false, problems };
    const pathsKey = named.map(([, path]) => path).join("\n");
    const statKey = files.map((file) => `${file.path}@${file.stat}`).join("\n");
    const known = this.#sets.get(pathsKey);
    if (known !== undefined && known.statKey === statKey) {
      return { ok: true, value: known, built: false };
    }
    const read = (field: string, path: string, marker: string): string | undefined => {
      if (path === "") return undefined;
      let text: string;
      try {
        text = readFileSync(path, "utf8");
      } catch (error) {
        problems.push({ field, message: `cannot read ${path} (${codeOf(error)})` });
        return undefined;
      }
      if (!text.includes(marker)) {
        const what = marker === PRIVATE_KEY ? "private key" : "certificate";
        problems.push({ field, message: `${path} holds no PEM ${what}` });
        return undefined;
      }
      return text;
    };
    const ca = read("tls.caFile", paths.caFile, CERTIFICATE);
    const cert = read("tls.clientCertFile", paths.clientCertFile, CERTIFICATE);
    const key = read("tls.clientKeyFile", paths.clientKeyFile, PRIVATE_KEY);
    if (problems.length > 0) return { ok: false, problems };
    let secureContext: SecureContext;
    try {
      // Parses what was read as OpenSSL will: a broken PEM or a key that is not the
      // certificate's is refused here, with the snapshot, not on the first request. The same
      // floor as the proxy's own TLS listener; a SecureContext carries it for every connection.
      // Called on the module object (not a named import) so a test can count the builds.
      secureContext = tls.createSecureContext({ ca, cert, key, minVersion: "TLSv1.2" });
    } catch (error) {
      const field = cert !== undefined ? "tls.clientCertFile" : "tls.caFile";
      // Names the files (never their contents): OpenSSL's message does not say which one.
      const named = [paths.caFile, paths.clientCertFile, paths.clientKeyFile].filter((p) => p);
      return {
        ok: false,
        problems: [
          {
            field,
            message: `is not usable: ${(error as Error).message} (read from ${named.join(", ")})`,
          },
        ],
      };
    }
    this.builds++;
    const contentHash = createHash("sha256")
      .update(JSON.stringify([ca, cert, key]))
      .digest("hex")
      .slice(0, 16);
    const value: TlsFileSet = Object.freeze({
      secureContext,
      statKey,
      files: Object.freeze(files),
      contentHash,
      pem: Object.freeze({ ca, cert, key, contextKey: contentHash }),
    });
    this.#sets.set(pathsKey, value);
    return { ok: true, value, built: true };
  }
}

/** The data plane's one cache: every compile (whole or delta, boot or reload) goes through it. */
export const upstreamTlsContexts = new TlsContextCache();

function codeOf(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? "unreadable";
}
