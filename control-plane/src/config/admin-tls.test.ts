import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestPki, type TestPki } from "../testing/test-pki.js";
import { readAdminTls } from "./admin-tls.js";

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
});
