import { hostname as osHostname } from "node:os";
import { keepOrigins, loadSettings, parseHostPort } from "@clawgate/runtime";
import { listenerLimitProblems } from "../proxy/listener-limits.js";
import { DATA_PLANE_SETTINGS, type DataPlaneConfig } from "./config-schema.js";
import { cpTlsPairingProblems } from "./cp-tls.js";
import { proxyTlsPairingProblems } from "./proxy-tls-settings.js";

export interface LoadConfigOptions {
  /** Command-line arguments after the script; default process.argv.slice(2). */
  argv?: readonly string[];
  /** Environment to read CLAWGATE_* from; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Used in the default node id; default os.hostname(). */
  hostname?: string;
  /** Reads the --config file; default fs.readFileSync as UTF-8. */
  readFile?: (path: string) => string;
}

/**
 * The data plane's settings through the shared layered loader, with the TLS pairing checks
 * and the node id, whose default follows the effective proxy port. A bad value throws a
 * ConfigError (CLAWGATE_INVALID_CONFIG) naming the field, the value and its layer.
 */
export function loadConfig(options: LoadConfigOptions = {}): DataPlaneConfig {
  const settings = loadSettings(DATA_PLANE_SETTINGS, {
    argv: options.argv ?? process.argv.slice(2),
    env: options.env ?? process.env,
    ...(options.readFile === undefined ? {} : { readFile: options.readFile }),
    check: (settings, layerOf) => [
      ...cpTlsPairingProblems(settings, layerOf),
      ...proxyTlsPairingProblems(settings, layerOf),
      ...listenerLimitProblems(settings, layerOf),
    ],
  });
  const proxy = parseHostPort(settings.proxyListen, { allowPortZero: true });
  const proxyPort = proxy.ok ? proxy.value.port : 0;
  const nodeId = settings.nodeId ?? `${options.hostname ?? osHostname()}-${proxyPort}`;
  // Keeps each value's layer, for the checks main makes later (TLS files, the access log).
  return keepOrigins(settings, Object.freeze({ ...settings, nodeId }));
}
