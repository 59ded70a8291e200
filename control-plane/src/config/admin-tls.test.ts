import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestPki, type TestPki } from "../testing/test-pki.js";
import { readAdminTls } from "./admin-tls.js";
import { loadControlPlaneSettings } from "./load-settings.js";

let pki: TestPki;
beforeAll(async () => {
  pki = await makeTestPki();
});
afterAll(() => pki?.remove());

/** The ConfigError's message, or "" when nothing was thrown. */
function failure(settings: Parameters<typeof readAdminTls>[0]): string {
  try {
    readAdminTls(settings);
    return "";
  } catch (error) {
    return (error as Error).message;
  }
}

describe("readAdminTls", () => {
  it("is plain HTTP when neither file is set, and reads both when both are", () => {
    expect(readAdminTls({})).toBeUndefined();
    const tls = readAdminTls({ adminTlsCertFile: pki.serverCert, adminTlsKeyFile: pki.serverKey });
    expect(tls?.cert.toString()).toContain("BEGIN CERTIFICATE");
  });

  it.each([
    [{ adminTlsCertFile: "cert" }, "adminTlsCertFile", "set adminTlsKeyFile with it"],
    [{ adminTlsKeyFile: "key" }, "adminTlsKeyFile", "set adminTlsCertFile with it"],
  ])("refuses %o naming the setting", (settings, field, reason) => {
    const message = failure(settings);
    expect(message).toContain(field);
    expect(message).toContain(reason);
  });

  it("refuses a key that is not the certificate's, and a file that holds no certificate", () => {
    expect(failure({ adminTlsCertFile: pki.serverCert, adminTlsKeyFile: pki.clientKey })).toContain(
      "is not the key of the certificate",
    );
    expect(failure({ adminTlsCertFile: pki.serverKey, adminTlsKeyFile: pki.serverKey })).toContain(
      "does not hold a PEM certificate",
    );
  });

  it("refuses one file without the other when the settings load, naming its layer", () => {
    expect(() =>
      loadControlPlaneSettings(["--bogus=1"], { CLAWGATE_ADMIN_TLS_CERT_FILE: "/etc/hostname" }),
    ).toThrow(
      'adminTlsCertFile = "/etc/hostname" (from env CLAWGATE_ADMIN_TLS_CERT_FILE): ' +
        "set adminTlsKeyFile with it (both or neither)",
    );
  });

  it("names the layer a file it cannot serve came from", () => {
    const settings = loadControlPlaneSettings(
      ["--admin-tls-cert-file", pki.serverCert, "--admin-tls-key-file", pki.clientKey],
      {},
    );
    expect(failure(settings)).toContain(
      `adminTlsKeyFile = "${pki.clientKey}" (from flag --admin-tls-key-file): is not the key`,
    );
  });
});
