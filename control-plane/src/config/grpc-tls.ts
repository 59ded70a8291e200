import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError, type ConfigProblem, settingError, settingOrigin } from "@clawgate/runtime";
import type { GrpcServerTls } from "../grpc/server-credentials.js";
import type { ControlPlaneSettings } from "./settings.js";

export type GrpcTlsSettings = Pick<
  ControlPlaneSettings,
  "grpcTlsCertFile" | "grpcTlsKeyFile" | "grpcTlsClientCaFile"
>;

type ReadFile = (path: string) => Buffer;

/**
 * The snapshot service's certificate and key go together, and a client CA (mutual TLS) needs
 * them. Checked when the settings load (with the other settings' problems) and again by
 * readGrpcServerTls; `layerOf` names where a field's value came from.
 */
export function grpcTlsPairingProblems(
  settings: GrpcTlsSettings,
  layerOf: (field: keyof GrpcTlsSettings) => string,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const problem = (field: keyof GrpcTlsSettings, reason: string) =>
    problems.push({ field, value: settings[field], layer: layerOf(field), reason });
  const { grpcTlsCertFile, grpcTlsKeyFile, grpcTlsClientCaFile } = settings;
  if (grpcTlsCertFile === undefined) {
    if (grpcTlsKeyFile !== undefined) {
      problem("grpcTlsKeyFile", "set grpcTlsCertFile with it (both or neither)");
    }
    if (grpcTlsClientCaFile !== undefined) {
      problem(
        "grpcTlsClientCaFile",
        "mutual TLS needs the control plane's own certificate: " +
          "set grpcTlsCertFile and grpcTlsKeyFile too",
      );
    }
  } else if (grpcTlsKeyFile === undefined) {
    problem("grpcTlsCertFile", "set grpcTlsKeyFile with it (both or neither)");
  }
  return problems;
}

/**
 * Reads the snapshot service's PEM files at boot: undefined when none is set (plaintext).
 * A file that is missing, unreadable or not the PEM it should be, a key that does not match
 * its certificate, or a client CA without a server certificate throws a ConfigError naming
 * the setting, so the binary exits with status 2 instead of serving something else.
 */
export function readGrpcServerTls(
  settings: GrpcTlsSettings,
  readFile: ReadFile = readFileSync,
): GrpcServerTls | undefined {
  const pairing = grpcTlsPairingProblems(settings, (field) => settingOrigin(settings, field));
  if (pairing.length > 0) throw new ConfigError(pairing);
  const { grpcTlsCertFile, grpcTlsKeyFile, grpcTlsClientCaFile } = settings;
  if (grpcTlsCertFile === undefined || grpcTlsKeyFile === undefined) return undefined;

  const certChain = read(settings, "grpcTlsCertFile", grpcTlsCertFile, readFile);
  const certificate = parse(settings, "grpcTlsCertFile", grpcTlsCertFile, "certificate", () =>
    pemCertificate(certChain),
  );
  const privateKey = read(settings, "grpcTlsKeyFile", grpcTlsKeyFile, readFile);
  const key = parse(settings, "grpcTlsKeyFile", grpcTlsKeyFile, "private key", (): KeyObject => {
    return createPrivateKey(privateKey);
  });
  if (!certificate.checkPrivateKey(key)) {
    fail(
      settings,
      "grpcTlsKeyFile",
      grpcTlsKeyFile,
      `is not the key of the certificate in ${grpcTlsCertFile}`,
    );
  }
  if (grpcTlsClientCaFile === undefined) return { certChain, privateKey };
  const clientCa = read(settings, "grpcTlsClientCaFile", grpcTlsClientCaFile, readFile);
  parse(settings, "grpcTlsClientCaFile", grpcTlsClientCaFile, "certificate", () =>
    pemCertificate(clientCa),
  );
  return { certChain, privateKey, clientCa };
}

// read, parse and fail are shared with the admin listener's TLS (admin-tls.ts); each names the
// setting, its path and the layer the path came from (settingOrigin of the loaded settings).

/** The first certificate of a PEM bundle; X509Certificate alone would also take DER. */
export function pemCertificate(pem: Buffer): X509Certificate {
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no BEGIN CERTIFICATE line");
  return new X509Certificate(pem);
}

export function read(settings: object, setting: string, path: string, readFile: ReadFile): Buffer {
  try {
    return readFile(path);
  } catch (error) {
    return fail(settings, setting, path, `cannot read it: ${(error as Error).message}`);
  }
}

export function parse<T>(
  settings: object,
  setting: string,
  path: string,
  what: string,
  parser: () => T,
): T {
  try {
    return parser();
  } catch (error) {
    return fail(
      settings,
      setting,
      path,
      `does not hold a PEM ${what}: ${(error as Error).message}`,
    );
  }
}

export function fail(settings: object, setting: string, path: string, reason: string): never {
  throw settingError(settings, setting, path, reason);
}
