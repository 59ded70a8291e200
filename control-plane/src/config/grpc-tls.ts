import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError } from "@clawgate/runtime";
import type { GrpcServerTls } from "../grpc/server-credentials.js";
import type { ControlPlaneSettings } from "./settings.js";

export type GrpcTlsSettings = Pick<
  ControlPlaneSettings,
  "grpcTlsCertFile" | "grpcTlsKeyFile" | "grpcTlsClientCaFile"
>;

type ReadFile = (path: string) => Buffer;

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
  const { grpcTlsCertFile, grpcTlsKeyFile, grpcTlsClientCaFile } = settings;
  if (grpcTlsCertFile === undefined) {
    if (grpcTlsKeyFile !== undefined) {
      fail("grpcTlsKeyFile", grpcTlsKeyFile, "set grpcTlsCertFile with it (both or neither)");
    }
    if (grpcTlsClientCaFile !== undefined) {
      fail(
        "grpcTlsClientCaFile",
        grpcTlsClientCaFile,
        "mutual TLS needs the control plane's own certificate: " +
          "set grpcTlsCertFile and grpcTlsKeyFile too",
      );
    }
    return undefined;
  }
  if (grpcTlsKeyFile === undefined) {
    return fail("grpcTlsCertFile", grpcTlsCertFile, "set grpcTlsKeyFile with it (both or neither)");
  }

  const certChain = read("grpcTlsCertFile", grpcTlsCertFile, readFile);
  const certificate = parse("grpcTlsCertFile", grpcTlsCertFile, "certificate", () =>
    pemCertificate(certChain),
  );
  const privateKey = read("grpcTlsKeyFile", grpcTlsKeyFile, readFile);
  const key = parse("grpcTlsKeyFile", grpcTlsKeyFile, "private key", (): KeyObject => {
    return createPrivateKey(privateKey);
  });
  if (!certificate.checkPrivateKey(key)) {
    fail(
      "grpcTlsKeyFile",
      grpcTlsKeyFile,
      `is not the key of the certificate in ${grpcTlsCertFile}`,
    );
  }
  if (grpcTlsClientCaFile === undefined) return { certChain, privateKey };
  const clientCa = read("grpcTlsClientCaFile", grpcTlsClientCaFile, readFile);
  parse("grpcTlsClientCaFile", grpcTlsClientCaFile, "certificate", () => pemCertificate(clientCa));
  return { certChain, privateKey, clientCa };
}

// read, parse and fail are shared with the admin listener's TLS (admin-tls.ts).

/** The first certificate of a PEM bundle; X509Certificate alone would also take DER. */
export function pemCertificate(pem: Buffer): X509Certificate {
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no BEGIN CERTIFICATE line");
  return new X509Certificate(pem);
}

export function read(setting: string, path: string, readFile: ReadFile): Buffer {
  try {
    return readFile(path);
  } catch (error) {
    return fail(setting, path, `cannot read it: ${(error as Error).message}`);
  }
}

export function parse<T>(setting: string, path: string, what: string, parser: () => T): T {
  try {
    return parser();
  } catch (error) {
    return fail(setting, path, `does not hold a PEM ${what}: ${(error as Error).message}`);
  }
}

export function fail(setting: string, path: string, reason: string): never {
  throw new ConfigError([{ field: setting, value: path, layer: "settings", reason }]);
}
