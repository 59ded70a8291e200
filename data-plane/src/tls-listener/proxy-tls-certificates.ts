import type { ServerOptions } from "node:https";
import type { SecureContext, Server as TlsServer } from "node:tls";
import { ConfigError } from "@clawgate/runtime";
import type { Logger } from "pino";
import { currentFileStatKey } from "../file-watch/file-stat-key.js";
import { StableFilePoll } from "../file-watch/stable-file-poll.js";
import {
  type LoadedCertificate,
  type LoadResult,
  loadCertificatePair,
  MIN_TLS_VERSION,
} from "./certificate-pair.js";
import { matchServerName } from "./sni-match.js";

export interface CertificateFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

export interface ProxyTlsCertificatesOptions {
  /** proxyTlsCertFile and proxyTlsKeyFile: served when no other certificate matches. */
  readonly defaultFiles: CertificateFiles;
  /** proxyTlsCertificates: chosen by the SNI name from the DNS names of each one's SAN. */
  readonly sniFiles: readonly CertificateFiles[];
  readonly logger: Logger;
  /**
   * The layer a setting's value came from, for a bad file at boot (settingOrigin of the loaded
   * settings); default "settings".
   */
  readonly originOf?: (field: string) => string;
  /** How often the files are checked for changes; default 1000 ms. */
  readonly pollIntervalMs?: number;
  /** The poll to use (a test drives one by hand); default one of its own. */
  readonly poll?: StableFilePoll;
}

/**
 * The proxy listener's certificates: read and checked at boot (a bad one is a ConfigError, so
 * the process exits 2 naming the setting), then watched. A changed file is read again and,
 * when it passes the same checks, serves every new connection; connections already open keep
 * the session they negotiated. A file that fails the checks is refused with a warning and the
 * previous certificate serves on, so a half-written renewal never takes the listener down.
 *
 * The files are polled with stat (StableFilePoll) rather than watched with inotify: renewals
 * are usually written beside the file and renamed over it (certbot, Kubernetes secret volumes
 * swap a symlink), which an inotify watch on the old inode never sees. Each is compared with
 * its stat when it was last read, and a change is read once the file is no longer being
 * written (the poll's rule), so a certificate rewritten in place is not read half-written.
 */
export class ProxyTlsCertificates {
  readonly #logger: Logger;
  readonly #poll: StableFilePoll;
  /** Each file's stat when it was last read (before the read: a write during it is a change). */
  readonly #readAt = new Map<string, string | undefined>();
  /** Each file to the reloads of the pairs naming it. */
  readonly #reloadsOf = new Map<string, (() => void)[]>();
  readonly #defaultFiles: CertificateFiles;
  readonly #sniFiles: readonly CertificateFiles[];
  #default: LoadedCertificate;
  readonly #sni: LoadedCertificate[];
  #server: TlsServer | undefined;

  constructor(options: ProxyTlsCertificatesOptions) {
    this.#logger = options.logger;
    this.#poll =
      options.poll ?? new StableFilePoll({ intervalMs: options.pollIntervalMs ?? 1_000 });
    this.#defaultFiles = options.defaultFiles;
    this.#sniFiles = options.sniFiles;
    const { certFile } = options.defaultFiles;
    const originOf = options.originOf ?? (() => "settings");
    this.#default = bootOrThrow(
      originOf,
      "proxyTlsCertFile",
      certFile,
      this.#load(options.defaultFiles, loadCertificatePair),
    );
    this.#sni = options.sniFiles.map((files) => {
      const loaded = bootOrThrow(
        originOf,
        "proxyTlsCertificates",
        `${files.certFile}:${files.keyFile}`,
        this.#load(files, loadSniPair),
      );
      return loaded;
    });
  }

  /** Secure server options: the default certificate, TLS 1.2+, ALPN h2 then http/1.1, SNI. */
  serverOptions(): ServerOptions {
    return {
      cert: this.#default.cert,
      key: this.#default.key,
      minVersion: MIN_TLS_VERSION,
      // The server's preference: HTTP/2 to clients that offer it, HTTP/1.1 to the others.
      ALPNProtocols: ["h2", "http/1.1"],
      SNICallback: (serverName, callback) => callback(null, this.contextFor(serverName)),
    };
  }

  /** The context a client naming `serverName` gets: a matching certificate, else the default. */
  contextFor(serverName: string): SecureContext {
    return (matchServerName(this.#sni, serverName) ?? this.#default).context;
  }

  /** Names of every SNI certificate now served, in order, for the start-up log line. */
  names(): string[][] {
    return this.#sni.map((certificate) => [...certificate.names]);
  }

  /** Starts watching the files; a reload of the default certificate updates `server`. */
  watch(server: TlsServer): void {
    this.#server = server;
    this.#watchPair(this.#defaultFiles, () => this.#reloadDefault());
    this.#sniFiles.forEach((files, index) => {
      this.#watchPair(files, () => this.#reloadSni(index));
    });
  }

  /** Stops watching; the certificates in use stay. */
  close(): void {
    this.#poll.close();
    this.#reloadsOf.clear();
  }

  #watchPair(files: CertificateFiles, reload: () => void): void {
    for (const path of new Set([files.certFile, files.keyFile])) {
      const reloads = this.#reloadsOf.get(path);
      if (reloads !== undefined) {
        reloads.push(reload);
        continue;
      }
      this.#reloadsOf.set(path, [reload]);
      this.#poll.watch(path, this.#readAt.get(path), () => {
        for (const each of this.#reloadsOf.get(path) ?? []) each();
      });
    }
  }

  /**
   * Reads a pair, noting each file's stat first. The poll's baselines move to them, refused or
   * not: a refused file is warned about once, and read again only when it changes again.
   */
  #load(
    files: CertificateFiles,
    load: (certFile: string, keyFile: string) => LoadResult,
  ): LoadResult {
    for (const path of [files.certFile, files.keyFile]) {
      const stat = currentFileStatKey(path);
      this.#readAt.set(path, stat);
      this.#poll.rebase(path, stat);
    }
    return load(files.certFile, files.keyFile);
  }

  #reloadDefault(): void {
    const loaded = this.#accept(
      this.#load(this.#defaultFiles, loadCertificatePair),
      this.#defaultFiles,
    );
    if (loaded === undefined) return;
    this.#default = loaded;
    // Clients that send no SNI name are served from the server's own context.
    this.#server?.setSecureContext({
      cert: loaded.cert,
      key: loaded.key,
      minVersion: MIN_TLS_VERSION,
    });
  }

  #reloadSni(index: number): void {
    const files = this.#sniFiles[index]!;
    const loaded = this.#accept(this.#load(files, loadSniPair), files);
    if (loaded !== undefined) this.#sni[index] = loaded;
  }

  #accept(result: LoadResult, files: CertificateFiles): LoadedCertificate | undefined {
    if (!result.ok) {
      this.#logger.warn(
        { certFile: files.certFile, keyFile: files.keyFile, reason: result.reason },
        "proxy TLS certificate change refused; the previous certificate keeps serving",
      );
      return undefined;
    }
    const loaded = result.value;
    this.#logger.info(
      {
        certFile: files.certFile,
        names: loaded.names,
        fingerprint: loaded.fingerprint,
        validTo: loaded.validTo,
      },
      "proxy TLS certificate reloaded",
    );
    return loaded;
  }
}

/** "cert.pem:key.pem", as proxyTlsCertificates spells a pair (the setting's own rule). */
export function parseCertificateFiles(entry: string): CertificateFiles {
  const colon = entry.indexOf(":");
  return { certFile: entry.slice(0, colon), keyFile: entry.slice(colon + 1) };
}

/** An SNI certificate no name can select would never be served: refused like a bad file. */
function loadSniPair(certFile: string, keyFile: string): LoadResult {
  const result = loadCertificatePair(certFile, keyFile);
  if (result.ok && result.value.names.length === 0) {
    return {
      ok: false,
      reason: `${certFile} has no DNS name in its subjectAltName, so no SNI name selects it`,
    };
  }
  return result;
}

function bootOrThrow(
  originOf: (field: string) => string,
  field: string,
  value: string,
  result: LoadResult,
): LoadedCertificate {
  if (result.ok) return result.value;
  throw new ConfigError([{ field, value, layer: originOf(field), reason: result.reason }]);
}
