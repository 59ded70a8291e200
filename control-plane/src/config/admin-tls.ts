import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { fail, parse, pemCertificate, read } from "./grpc-tls.js";
import type { ControlPlaneSettings } from "./settings.js";

export type AdminTlsSettings = Pick<ControlPlaneSettings, "adminTlsCertFile" | "adminTlsKeyFile">;

/** What fastify's `https` option takes. */
export interface AdminTls {
  cert: Buffer;
  key: Buffer;
}

/**
 * Reads the admin listener's PEM files at boot: undefined when neither is set (plain HTTP).
 * One without the other, a file that cannot be read or is not PEM, or a key that does not
 * match its certificate throws a ConfigError naming the setting, so the binary exits 2 rather
 * than serve the admin token over plain HTTP by mistake.
 */
export function readAdminTls(
  settings: AdminTlsSettings,
  readFile: (path: string) => Buffer = readFileSync,
): AdminTls | undefined {
  const { adminTlsCertFile, adminTlsKeyFile } = settings;
  if (adminTlsCertFile === undefined && adminTlsKeyFile === undefined) return undefined;
  if (adminTlsCertFile === undefined) {
    return fail(
      "adminTlsKeyFile",
      String(adminTlsKeyFile),
      "set adminTlsCertFile with it (both or neither)",
    );
  }
  if (adminTlsKeyFile === undefined) {
    return fail(
      "adminTlsCertFile",
      adminTlsCertFile,
      "set adminTlsKeyFile with it (both or neither)",
    );
  }
  const cert = read("adminTlsCertFile", adminTlsCertFile, readFile);
  const certificate = parse("adminTlsCertFile", adminTlsCertFile, "certificate", () =>
    pemCertificate(cert),
  );
  const key = read("adminTlsKeyFile", adminTlsKeyFile, readFile);
  const privateKey = parse("adminTlsKeyFile", adminTlsKeyFile, "private key", () =>
    createPrivateKey(key),
  );
  if (!certificate.checkPrivateKey(privateKey)) {
    fail(
      "adminTlsKeyFile",
      adminTlsKeyFile,
      `is not the key of the certificate in ${adminTlsCertFile}`,
    );
  }
  return { cert, key };
}
