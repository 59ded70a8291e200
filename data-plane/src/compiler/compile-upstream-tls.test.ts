import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { create, SnapshotDeltaSchema, SnapshotSchema, type UpstreamTls } from "@clawgate/proto";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileDelta } from "./compile-delta.js";
import { compileSnapshot } from "./compile-snapshot.js";
import { FrozenCompiledSnapshot } from "./frozen-compiled-snapshot.js";

function compileWith(
  tls: Omit<Partial<UpstreamTls>, "$typeName"> | undefined,
  address = "api.example.com:443",
) {
  return compileSnapshot(
    create(SnapshotSchema, {
      version: 1n,
      upstreams: [
        {
          name: "api",
          nodes: [{ address, weight: 1 }],
          ...(tls && { tls: { enabled: true, ...tls } }),
        },
      ],
      routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "api" }],
    }),
  );
}

// The files an upstream's tls names live on the data plane's machine and are read as the
// snapshot is compiled: one that cannot be used refuses the snapshot (a NACK naming the field
// and the path) instead of failing every request to the upstream later.
describe("compiling an upstream's tls", () => {
  let pki: TestPki;
  beforeAll(async () => {
    pki = await makeTestPki();
  });
  afterAll(() => pki.remove());

  it("dials https origins, by DNS name, with the files read", () => {
    const result = compileWith({ caFile: pki.caCert });
    if (!result.ok) throw new Error(result.reason);
    const upstream = result.value.upstreams.get("api")!;
    expect(upstream.nodes[0]!.origin).toBe("https://api.example.com:443");
    expect(upstream.tls?.probe.files.ca).toContain("BEGIN CERTIFICATE");
    expect(upstream.tls?.rejectUnauthorized).toBe(true);
    // Pools are keyed by the TLS settings too, so a renewed file gets new connections.
    expect([...result.value.poolKeys().get("api.example.com:443")!][0]).toMatch(
      /\/tls-[0-9a-f]{16}$/,
    );
  });

  it("gives an http2 upstream an HTTP/1.1 pool for WebSocket handshakes, kept with its own", () => {
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [
          {
            name: "api",
            nodes: [{ address: "api.example.com:443", weight: 1 }],
            tls: { enabled: true, caFile: pki.caCert },
            http2: true,
          },
        ],
        routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "api" }],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const settings = result.value.match("GET", "a.test", "/", {})!.targets[0]!.poolSettings;
    expect(settings.http2).toBe(true);
    // undici cannot upgrade on an HTTP/2 connection: the handshake pool offers HTTP/1.1 only.
    expect(settings.http1).toMatchObject({ http2: false, tls: settings.tls });
    expect([...result.value.poolKeys().get("api.example.com:443")!].sort()).toEqual(
      [settings.key, settings.http1!.key].sort(),
    );
  });

  it("keeps plaintext http when tls is absent or disabled", () => {
    for (const tls of [undefined, { enabled: false, caFile: pki.caCert }]) {
      const result = compileWith(tls);
      if (!result.ok) throw new Error(result.reason);
      expect(result.value.upstreams.get("api")!.nodes[0]!.origin).toBe(
        "http://api.example.com:443",
      );
    }
  });

  it("refuses a file it cannot read, naming the field and the path", () => {
    const result = compileWith({ caFile: "/nonexistent/ca.pem" });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.reason).toBe(
      'upstream "api": tls.caFile cannot read /nonexistent/ca.pem (ENOENT)',
    );
  });

  it("refuses a file that holds no PEM, and a key that is not the certificate's", () => {
    const notPem = join(pki.dir, "not-pem.txt");
    writeFileSync(notPem, "hello\n");
    const bad = compileWith({ caFile: notPem });
    expect(bad.ok ? "" : bad.reason).toBe(
      `upstream "api": tls.caFile ${notPem} holds no PEM certificate`,
    );
    const mismatched = compileWith({
      clientCertFile: pki.clientCert,
      clientKeyFile: pki.serverKey,
    });
    expect(mismatched.ok ? "" : mismatched.reason).toMatch(
      /^upstream "api": tls\.clientCertFile is not usable: .*key values mismatch/,
    );
  });
});

describe("a delta naming a tls file this machine cannot read", () => {
  it("is refused, naming the field and the path, and the base keeps its upstream", () => {
    const base = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [{ name: "api", nodes: [{ address: "127.0.0.1:8443", weight: 1 }] }],
        routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "api" }],
      }),
    );
    if (!base.ok || !(base.value instanceof FrozenCompiledSnapshot)) throw new Error("no base");
    const delta = create(SnapshotDeltaSchema, {
      version: 2n,
      baseVersion: 1n,
      upstreams: [
        {
          name: "api",
          nodes: [{ address: "127.0.0.1:8443", weight: 1 }],
          tls: { enabled: true, caFile: "/nonexistent/ca.pem" },
        },
      ],
    });
    const result = compileDelta(base.value, delta);
    expect(result.ok ? "" : result.reason).toBe(
      'upstream "api": tls.caFile cannot read /nonexistent/ca.pem (ENOENT)',
    );
    // Still the base's plaintext upstream, and the base still takes a good delta.
    expect(base.value.upstreams.get("api")!.nodes[0]!.origin).toBe("http://127.0.0.1:8443");
    expect(
      compileDelta(base.value, create(SnapshotDeltaSchema, { version: 3n, baseVersion: 1n })).ok,
    ).toBe(true);
  });
});
