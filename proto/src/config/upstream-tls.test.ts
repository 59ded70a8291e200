import { describe, expect, it } from "vitest";
import { create, SnapshotSchema } from "../index.js";
import { validateResource, validateSnapshot } from "./validate-config.js";

function upstreamProblems(tls: unknown, extra: Record<string, unknown> = {}) {
  const result = validateResource("upstreams", "api", {
    nodes: [{ address: "api.example.com:443" }],
    tls,
    ...extra,
  });
  return result.ok ? [] : result.problems.map((p) => `${p.field} ${p.message}`);
}

describe("upstream tls and hostRewrite", () => {
  it("fills the defaults: a tls block means TLS on with verification; hostRewrite off", () => {
    const result = validateResource("upstreams", "api", {
      nodes: [{ address: "api.example.com:443" }],
      tls: {},
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.document.tls).toEqual({ enabled: true, verify: true });
    expect(result.document.hostRewrite).toBe(false);
    const plain = validateResource("upstreams", "plain", { nodes: [] });
    expect(plain.ok && plain.document.tls).toBeUndefined();
  });

  it.each([
    [{ serverName: "10.0.0.1" }, "tls.serverName must be a DNS name, not an IP address"],
    [{ serverName: "bad name" }, "tls.serverName must be a DNS name"],
    [{ caFile: "certs/ca.pem" }, "tls.caFile must be an absolute path on the data plane's machine"],
    [{ clientCertFile: "/etc/c.pem" }, "tls.clientKeyFile is required with clientCertFile"],
    [{ clientKeyFile: "/etc/k.pem" }, "tls.clientCertFile is required with clientKeyFile"],
    [{ verify: "yes" }, "tls.verify"],
    [{ ciphers: "x" }, "tls"],
  ])("refuses %j naming the field", (tls, expected) => {
    expect(upstreamProblems(tls).join("; ")).toContain(expected);
  });

  it("takes http2 (default false) only with tls, where ALPN can negotiate it", () => {
    expect(upstreamProblems({}, { http2: true })).toEqual([]);
    expect(upstreamProblems(undefined, { http2: true })).toEqual([
      "http2 needs tls: HTTP/2 to the nodes is negotiated in the TLS handshake (ALPN)",
    ]);
    expect(upstreamProblems({ enabled: false }, { http2: true })).toHaveLength(1);
    const plain = validateResource("upstreams", "api", { nodes: [{ address: "a:80" }] });
    expect(plain.ok && plain.document.http2).toBe(false);
  });

  it("applies the same rules to a snapshot on the wire, with the document's field names", () => {
    const snapshot = create(SnapshotSchema, {
      version: 1n,
      upstreams: [
        {
          name: "api",
          nodes: [{ address: "api.example.com:443", weight: 1 }],
          tls: { enabled: true, caFile: "ca.pem", serverName: "127.0.0.1", clientCertFile: "/c" },
        },
      ],
    });
    const problems = validateSnapshot(snapshot).map((p) => `${p.field} ${p.message}`);
    expect(problems).toEqual([
      "tls.serverName must be a DNS name, not an IP address (SNI carries names only)",
      "tls.caFile must be an absolute path on the data plane's machine",
      "tls.clientKeyFile is required with clientCertFile",
    ]);
  });
});
