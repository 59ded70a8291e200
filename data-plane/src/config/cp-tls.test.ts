import { generateKeyPairSync } from "node:crypto";
import { type ConfigError, isConfigError } from "@clawgate/runtime";
import { describe, expect, it } from "vitest";
import { type CpTlsSettings, readCpTls } from "./cp-tls.js";
import { loadConfig } from "./load-config.js";

// A real PEM key, so a parse failure below is about the file's kind, not its syntax.
const KEY_PEM = generateKeyPairSync("ec", { namedCurve: "P-256" })
  .privateKey.export({ type: "pkcs8", format: "pem" })
  .toString();

function load(env: Record<string, string>, argv: string[] = []) {
  return loadConfig({ argv, env, hostname: "dp-host", readFile: () => "" });
}

function thrown(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (isConfigError(error)) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("control-plane TLS settings", () => {
  it("are unset by default, which means plaintext", () => {
    const config = load({});
    expect(config.cpTlsCaFile).toBeUndefined();
    expect(readCpTls(config)).toBeUndefined();
  });

  it("are read from CLAWGATE_CP_TLS_* and flags", () => {
    const config = load(
      {
        CLAWGATE_CP_TLS_CA_FILE: "/env/ca.crt",
        CLAWGATE_CP_TLS_CERT_FILE: "/env/tls.crt",
        CLAWGATE_CP_TLS_KEY_FILE: "/env/tls.key",
      },
      ["--cp-tls-server-name", "cp.internal"],
    );
    expect(config).toMatchObject({
      cpTlsCaFile: "/env/ca.crt",
      cpTlsCertFile: "/env/tls.crt",
      cpTlsKeyFile: "/env/tls.key",
      cpTlsServerName: "cp.internal",
    });
  });

  it.each([
    [
      "a client certificate without the CA",
      { CLAWGATE_CP_TLS_CERT_FILE: "/c", CLAWGATE_CP_TLS_KEY_FILE: "/k" },
      { field: "cpTlsCertFile", layer: "env CLAWGATE_CP_TLS_CERT_FILE" },
      /needs cpTlsCaFile/,
    ],
    [
      "a certificate without its key",
      { CLAWGATE_CP_TLS_CA_FILE: "/ca", CLAWGATE_CP_TLS_CERT_FILE: "/c" },
      { field: "cpTlsCertFile", value: "/c" },
      /set cpTlsKeyFile with it/,
    ],
    [
      "a key without its certificate",
      { CLAWGATE_CP_TLS_CA_FILE: "/ca", CLAWGATE_CP_TLS_KEY_FILE: "/k" },
      { field: "cpTlsKeyFile", value: "/k" },
      /set cpTlsCertFile with it/,
    ],
    [
      "a server name without the CA",
      { CLAWGATE_CP_TLS_SERVER_NAME: "cp.internal" },
      { field: "cpTlsServerName" },
      /needs cpTlsCaFile/,
    ],
    [
      "a server name that is no host name",
      { CLAWGATE_CP_TLS_CA_FILE: "/ca", CLAWGATE_CP_TLS_SERVER_NAME: "cp internal" },
      { field: "cpTlsServerName", value: "cp internal" },
      /must be a host name/,
    ],
  ])("refuses %s at load time, naming the field and its layer", (_label, env, problem, reason) => {
    const error = thrown(() => load(env));
    expect(error.problems[0]).toMatchObject(problem);
    expect(error.problems[0]?.reason).toMatch(reason);
  });

  it.each<[string, CpTlsSettings, Record<string, string>, string, RegExp]>([
    ["a missing CA file", { cpTlsCaFile: "/nope/ca.crt" }, {}, "cpTlsCaFile", /cannot read it/],
    [
      "a CA file that holds a key",
      { cpTlsCaFile: "/ca.pem" },
      { "/ca.pem": KEY_PEM },
      "cpTlsCaFile",
      /does not hold a PEM certificate/,
    ],
    // A valid CA and client pair needs certificates; snapshot-channel-tls.test.ts in the
    // control plane reads real ones made with openssl.
  ])("refuses %s when reading the files", (_label, settings, files, field, reason) => {
    const readFile = (path: string) => {
      const text = files[path];
      if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`);
      return Buffer.from(text);
    };
    const error = thrown(() => readCpTls(settings, readFile));
    expect(error.code).toBe("CLAWGATE_INVALID_CONFIG");
    expect(error.problems[0]).toMatchObject({
      field,
      value: settings[field as keyof CpTlsSettings],
    });
    expect(error.problems[0]?.reason).toMatch(reason);
  });

  it("names the layer a file that cannot be read came from", () => {
    const config = load({ CLAWGATE_CP_TLS_CA_FILE: "/nope/ca.crt" });
    const error = thrown(() => readCpTls(config));
    expect(error.message).toContain(
      'cpTlsCaFile = "/nope/ca.crt" (from env CLAWGATE_CP_TLS_CA_FILE): cannot read it',
    );
  });
});
