import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError, type ConfigProblem, settingOrigin } from "@clawgate/runtime";
import { fail, parse, pemCertificate, read } from "./grpc-tls.js";
import type { ControlPlaneSettings } from "./settings.js";

export type AdminTlsSettings = Pick<ControlPlaneSettings, "adminTlsCertFile" | "adminTlsKeyFile">;

/** What fastify's `https` option takes. */
export interface AdminTls {
  cert: Buffer;
  key: Buffer;
}

/**
 * The admin listener's certificate and key, both or neither: one alone would serve the admin
 * token over plain HTTP by mistake. Checked when the settings load (with the other settings'
 * problems) and again by readAdminTls; `layerOf` names where a field's value came from.
 */
export function adminTlsPairingProblems(
  settings: AdminTlsSettings,
  layerOf: (field: keyof AdminTlsSettings) => string,
): ConfigProblem[] {
  const { adminTlsCertFile, adminTlsKeyFile } = settings;
  if (adminTlsCertFile !== undefined && adminTlsKeyFile === undefined) {
    const reason = "set adminTlsKeyFile with it (both or neither)";
    return [
      {
        field: "adminTlsCertFile",
        value: adminTlsCertFile,
        layer: layerOf("adminTlsCertFile"),
        reason,
      },
    ];
  }
  if (adminTlsKeyFile !== undefined && adminTlsCertFile === undefined) {
    const reason = "set adminTlsCertFile with it (both or neither)";
    return [
      {
        field: "adminTlsKeyFile",
        value: adminTlsKeyFile,
        layer: layerOf("adminTlsKeyFile"),
        reason,
      },
    ];
  }
  return [];
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
  const pairing = adminTlsPairingProblems(settings, (field) => settingOrigin(settings, field));
  if (pairing.length > 0) throw new ConfigError(pairing);
  const { adminTlsCertFile, adminTlsKeyFile } = settings;
  if (adminTlsCertFile === undefined || adminTlsKeyFile === undefined) return undefined;
  const cert = read(settings, "adminTlsCertFile", adminTlsCertFile, readFile);
  const certificate = parse(settings, "adminTlsCertFile", adminTlsCertFile, "certificate", () =>
    pemCertificate(cert),
  );
  const key = read(settings, "adminTlsKeyFile", adminTlsKeyFile, readFile);
  const privateKey = parse(settings, "adminTlsKeyFile", adminTlsKeyFile, "private key", () =>
    createPrivateKey(key),
  );
  if (!certificate.checkPrivateKey(privateKey)) {
    fail(
      settings,
      "adminTlsKeyFile",
      adminTlsKeyFile,
      `is not the key of the certificate in ${adminTlsCertFile}`,
    );
  }
  return { cert, key };
}
