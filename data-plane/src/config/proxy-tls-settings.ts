import type { ConfigProblem } from "@clawgate/runtime";
import type { DataPlaneConfig } from "./config-schema.js";

export type ProxyTlsSettings = Pick<
  DataPlaneConfig,
  "proxyTlsListen" | "proxyTlsCertFile" | "proxyTlsKeyFile" | "proxyTlsCertificates"
>;
type ProxyTlsField = keyof ProxyTlsSettings;

/**
 * The proxy's TLS settings only work together: a listener needs the default certificate and
 * its key (served to clients that send no SNI name or one no other certificate carries), and
 * certificates without a listener would silently serve nothing.
 */
export function proxyTlsPairingProblems(
  settings: ProxyTlsSettings,
  layerOf: (field: ProxyTlsField) => string,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const problem = (field: ProxyTlsField, reason: string) =>
    problems.push({ field, value: settings[field], layer: layerOf(field), reason });
  const { proxyTlsListen, proxyTlsCertFile, proxyTlsKeyFile, proxyTlsCertificates } = settings;
  if (proxyTlsListen !== undefined) {
    if (proxyTlsCertFile === undefined) {
      problem("proxyTlsListen", "needs proxyTlsCertFile, the default certificate");
    }
    if (proxyTlsKeyFile === undefined) {
      problem("proxyTlsListen", "needs proxyTlsKeyFile, the default certificate's key");
    }
    return problems;
  }
  const reason = "needs proxyTlsListen, which turns the TLS listener on";
  if (proxyTlsCertFile !== undefined) problem("proxyTlsCertFile", reason);
  if (proxyTlsKeyFile !== undefined) problem("proxyTlsKeyFile", reason);
  if (proxyTlsCertificates.length > 0) problem("proxyTlsCertificates", reason);
  return problems;
}
