import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError, type ConfigProblem, settingError, settingOrigin } from "@clawgate/runtime";
import type { SnapshotChannelTls } from "../snapshot-client/channel-credentials.js";
import type { DataPlaneConfig } from "./config-schema.js";

export type CpTlsSettings = Pick<
  DataPlaneConfig,
  "cpTlsCaFile" | "cpTlsCertFile" | "cpTlsKeyFile" | "cpTlsServerName"
>;
type CpTlsField = keyof CpTlsSettings;

/**
 * Settings that only make sense together: a client certificate and its key, both or neither,
 * and neither without the CA that turns TLS on (a client certificate over plaintext would
 * silently mean no TLS at all). `layerOf` names where a field's value came from.
 */
export function cpTlsPairingProblems(
  settings: CpTlsSettings,
  layerOf: (field: CpTlsField) => string,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const problem = (field: CpTlsField, reason: string) =>
    problems.push({ field, value: settings[field], layer: layerOf(field), reason });
  const { cpTlsCaFile, cpTlsCertFile, cpTlsKeyFile, cpTlsServerName } = settings;
  if (cpTlsCertFile !== undefined && cpTlsKeyFile === undefined) {
    problem("cpTlsCertFile", "set cpTlsKeyFile with it (both or neither)");
  }
  if (cpTlsKeyFile !== undefined && cpTlsCertFile === undefined) {
    problem("cpTlsKeyFile", "set cpTlsCertFile with it (both or neither)");
  }
  if (cpTlsCaFile === undefined) {
    const reason = "needs cpTlsCaFile, which turns TLS on and names the CA to trust";
    if (cpTlsCertFile !== undefined) problem("cpTlsCertFile", reason);
    else if (cpTlsKeyFile !== undefined) problem("cpTlsKeyFile", reason);
    if (cpTlsServerName !== undefined) problem("cpTlsServerName", reason);
  }
  return problems;
}

type ReadFile = (path: string) => Buffer;

/**
 * Reads the snapshot stream's PEM files at boot: undefined without cpTlsCaFile (plaintext).
 * A file that is missing, unreadable or not the PEM it should be, or a key that does not match
 * its certificate, throws a ConfigError naming the setting, so the binary exits with status 2.
 */
export function readCpTls(
  settings: CpTlsSettings,
  readFile: ReadFile = readFileSync,
): SnapshotChannelTls | undefined {
  const pairing = cpTlsPairingProblems(settings, (field) => settingOrigin(settings, field));
  if (pairing.length > 0) throw new ConfigError(pairing);
  const { cpTlsCaFile, cpTlsCertFile, cpTlsKeyFile, cpTlsServerName } = settings;
  if (cpTlsCaFile === undefined) return undefined;

  const ca = read(settings, "cpTlsCaFile", cpTlsCaFile, readFile);
  parse(settings, "cpTlsCaFile", cpTlsCaFile, "certificate", () => pemCertificate(ca));
  const serverName = cpTlsServerName === undefined ? {} : { serverName: cpTlsServerName };
  if (cpTlsCertFile === undefined || cpTlsKeyFile === undefined) return { ca, ...serverName };

  const certChain = read(settings, "cpTlsCertFile", cpTlsCertFile, readFile);
  const certificate = parse(settings, "cpTlsCertFile", cpTlsCertFile, "certificate", () =>
    pemCertificate(certChain),
  );
  const privateKey = read(settings, "cpTlsKeyFile", cpTlsKeyFile, readFile);
  const key = parse(
    settings,
    "cpTlsKeyFile",
    cpTlsKeyFile,
    "private key",
    (): KeyObject => createPrivateKey(privateKey),
  );
  if (!certificate.checkPrivateKey(key)) {
    fail(
      settings,
      "cpTlsKeyFile",
      cpTlsKeyFile,
      `is not the key of the certificate in ${cpTlsCertFile}`,
    );
  }
  return { ca, certChain, privateKey, ...serverName };
}

/** The first certificate of a PEM bundle; X509Certificate alone would also take DER. */
function pemCertificate(pem: Buffer): X509Certificate {
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no BEGIN CERTIFICATE line");
  return new X509Certificate(pem);
}

function read(settings: CpTlsSettings, field: CpTlsField, path: string, readFile: ReadFile) {
  try {
    return readFile(path);
  } catch (error) {
    return fail(settings, field, path, `cannot read it: ${(error as Error).message}`);
  }
}

function parse<T>(
  settings: CpTlsSettings,
  field: CpTlsField,
  path: string,
  what: string,
  parser: () => T,
): T {
  try {
    return parser();
  } catch (error) {
    return fail(settings, field, path, `does not hold a PEM ${what}: ${(error as Error).message}`);
  }
}

/** Names the layer the path came from, as the loader's own checks do. */
function fail(settings: CpTlsSettings, field: CpTlsField, path: string, reason: string): never {
  throw settingError(settings, field, path, reason);
}
