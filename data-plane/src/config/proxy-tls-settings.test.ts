import { isConfigError } from "@clawgate/runtime";
import { describe, expect, it } from "vitest";
import { loadConfig } from "./load-config.js";

function problems(env: Record<string, string>): string {
  try {
    loadConfig({ argv: [], env, hostname: "dp-host", readFile: () => "" });
  } catch (error) {
    if (isConfigError(error)) return error.message;
    throw error;
  }
  return "";
}

describe("proxy TLS settings", () => {
  it("are read from CLAWGATE_PROXY_TLS_* with pairs of files for SNI", () => {
    const config = loadConfig({
      argv: [],
      env: {
        CLAWGATE_PROXY_TLS_LISTEN: "0.0.0.0:8443",
        CLAWGATE_PROXY_TLS_CERT_FILE: "/etc/tls/default.crt",
        CLAWGATE_PROXY_TLS_KEY_FILE: "/etc/tls/default.key",
        CLAWGATE_PROXY_TLS_CERTIFICATES:
          "/etc/tls/a.crt:/etc/tls/a.key, /etc/tls/b.crt:/etc/tls/b.key",
      },
      hostname: "dp-host",
    });
    expect(config.proxyTlsListen).toBe("0.0.0.0:8443");
    expect(config.proxyTlsCertificates).toEqual([
      "/etc/tls/a.crt:/etc/tls/a.key",
      "/etc/tls/b.crt:/etc/tls/b.key",
    ]);
  });

  it("refuse a listener without its default certificate, and certificates without a listener", () => {
    expect(problems({ CLAWGATE_PROXY_TLS_LISTEN: "0.0.0.0:8443" })).toContain(
      'proxyTlsListen = "0.0.0.0:8443" (from env CLAWGATE_PROXY_TLS_LISTEN): needs proxyTlsCertFile',
    );
    expect(problems({ CLAWGATE_PROXY_TLS_CERT_FILE: "/etc/tls/default.crt" })).toContain(
      "proxyTlsCertFile",
    );
    expect(
      problems({ CLAWGATE_PROXY_TLS_CERTIFICATES: "/etc/tls/a.crt:/etc/tls/a.key" }),
    ).toContain("needs proxyTlsListen");
    expect(
      problems({
        CLAWGATE_PROXY_TLS_LISTEN: "0.0.0.0:8443",
        CLAWGATE_PROXY_TLS_CERT_FILE: "/c",
        CLAWGATE_PROXY_TLS_KEY_FILE: "/k",
        CLAWGATE_PROXY_TLS_CERTIFICATES: "/etc/tls/a.crt",
      }),
    ).toContain("must be certFile:keyFile");
  });
});
