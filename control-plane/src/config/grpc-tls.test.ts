import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestPki, type TestPki } from "../testing/test-pki.js";
import { type GrpcTlsSettings, readGrpcServerTls } from "./grpc-tls.js";
import { loadControlPlaneSettings } from "./load-settings.js";

let pki: TestPki;
beforeAll(async () => {
  pki = await makeTestPki();
});
afterAll(() => pki?.remove());

function configError(settings: GrpcTlsSettings): { code: string; message: string } {
  try {
    readGrpcServerTls(settings);
  } catch (error) {
    return error as { code: string; message: string };
  }
  throw new Error("expected a ConfigError");
}

describe("gRPC TLS settings", () => {
  it("are read from CLAWGATE_GRPC_TLS_* and flags, and unset by default", () => {
    const defaults = loadControlPlaneSettings([], {});
    expect(defaults.grpcTlsCertFile).toBeUndefined();
    expect(defaults.grpcTlsKeyFile).toBeUndefined();
    expect(defaults.grpcTlsClientCaFile).toBeUndefined();
    expect(readGrpcServerTls(defaults)).toBeUndefined();

    const settings = loadControlPlaneSettings(["--grpc-tls-client-ca-file", "/flag/ca.crt"], {
      CLAWGATE_GRPC_TLS_CERT_FILE: "/env/tls.crt",
      CLAWGATE_GRPC_TLS_KEY_FILE: "/env/tls.key",
      CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: "/env/ca.crt",
    });
    expect(settings).toMatchObject({
      grpcTlsCertFile: "/env/tls.crt",
      grpcTlsKeyFile: "/env/tls.key",
      grpcTlsClientCaFile: "/flag/ca.crt",
    });
  });

  it("reads the server certificate and key, and the client CA for mutual TLS", () => {
    const tls = readGrpcServerTls({
      grpcTlsCertFile: pki.serverCert,
      grpcTlsKeyFile: pki.serverKey,
    });
    expect(tls?.certChain.equals(readFileSync(pki.serverCert))).toBe(true);
    expect(tls?.privateKey.equals(readFileSync(pki.serverKey))).toBe(true);
    expect(tls?.clientCa).toBeUndefined();

    const mutual = readGrpcServerTls({
      grpcTlsCertFile: pki.serverCert,
      grpcTlsKeyFile: pki.serverKey,
      grpcTlsClientCaFile: pki.caCert,
    });
    expect(mutual?.clientCa?.equals(readFileSync(pki.caCert))).toBe(true);
  });

  it.each<[string, () => GrpcTlsSettings, string, RegExp]>([
    [
      "a client CA without a server certificate",
      () => ({ grpcTlsClientCaFile: pki.caCert }),
      "grpcTlsClientCaFile",
      /needs the control plane's own certificate/,
    ],
    [
      "a certificate without its key",
      () => ({ grpcTlsCertFile: pki.serverCert }),
      "grpcTlsCertFile",
      /set grpcTlsKeyFile with it/,
    ],
    [
      "a key without its certificate",
      () => ({ grpcTlsKeyFile: pki.serverKey }),
      "grpcTlsKeyFile",
      /set grpcTlsCertFile with it/,
    ],
    [
      "a missing certificate file",
      () => ({ grpcTlsCertFile: join(pki.dir, "nope.crt"), grpcTlsKeyFile: pki.serverKey }),
      "grpcTlsCertFile",
      /cannot read it: ENOENT/,
    ],
    [
      "a key file that holds a certificate",
      () => ({ grpcTlsCertFile: pki.serverCert, grpcTlsKeyFile: pki.serverCert }),
      "grpcTlsKeyFile",
      /does not hold a PEM private key/,
    ],
    [
      "a certificate file that holds a key",
      () => ({ grpcTlsCertFile: pki.serverKey, grpcTlsKeyFile: pki.serverKey }),
      "grpcTlsCertFile",
      /does not hold a PEM certificate/,
    ],
    [
      "a key that belongs to another certificate",
      () => ({ grpcTlsCertFile: pki.serverCert, grpcTlsKeyFile: pki.clientKey }),
      "grpcTlsKeyFile",
      /is not the key of the certificate/,
    ],
    [
      "an unreadable client CA",
      () => ({
        grpcTlsCertFile: pki.serverCert,
        grpcTlsKeyFile: pki.serverKey,
        grpcTlsClientCaFile: pki.dir,
      }),
      "grpcTlsClientCaFile",
      /cannot read it: EISDIR/,
    ],
  ])("refuses %s, naming %s", (_label, settings, setting, reason) => {
    const error = configError(settings());
    // The code the bin turns into exit status 2.
    expect(error.code).toBe("CLAWGATE_INVALID_CONFIG");
    expect(error.message).toContain(`${setting} = `);
    expect(error.message).toMatch(reason);
  });

  it("refuses a client CA without the certificate when the settings load, naming its layer", () => {
    expect(() =>
      loadControlPlaneSettings(["--grpc-tls-client-ca-file", "/ca.crt"], {
        CLAWGATE_GRPC_TLS_KEY_FILE: "/tls.key",
      }),
    ).toThrow(
      'CLAWGATE_INVALID_CONFIG: grpcTlsKeyFile = "/tls.key" (from env CLAWGATE_GRPC_TLS_KEY_FILE): ' +
        "set grpcTlsCertFile with it (both or neither); " +
        'grpcTlsClientCaFile = "/ca.crt" (from flag --grpc-tls-client-ca-file): mutual TLS needs',
    );
  });

  it("names the layer a file that cannot be read came from", () => {
    const settings = loadControlPlaneSettings([], {
      CLAWGATE_GRPC_TLS_CERT_FILE: "/nope/tls.crt",
      CLAWGATE_GRPC_TLS_KEY_FILE: "/nope/tls.key",
    });
    expect(configError(settings).message).toContain(
      'grpcTlsCertFile = "/nope/tls.crt" (from env CLAWGATE_GRPC_TLS_CERT_FILE): cannot read it',
    );
  });
});
