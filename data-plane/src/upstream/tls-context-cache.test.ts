import { once } from "node:events";
import { copyFileSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import tls from "node:tls";
import { create, type Snapshot, SnapshotSchema } from "@clawgate/proto";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { compileSnapshot, compileSnapshotSteps } from "../compiler/compile-snapshot.js";
import { tlsConnector } from "./tls-connector.js";

const UPSTREAMS = 20;
const CONNECTIONS = 5;

/** UPSTREAMS upstreams naming the same CA file, one node and one route each. */
function sharingOneCa(caFile: string): Snapshot {
  const names = Array.from({ length: UPSTREAMS }, (_, i) => `api-${i}`);
  return create(SnapshotSchema, {
    version: 1n,
    upstreams: names.map((name) => ({
      name,
      nodes: [{ address: "127.0.0.1:443", weight: 1 }],
      tls: { enabled: true, caFile },
    })),
    routes: names.map((name) => ({ name, match: { pathPrefix: `/${name}` }, upstream: name })),
  });
}

/** How many yields (points where the event loop may run) a compile makes. */
function stepsOf(snapshot: Snapshot): number {
  const steps = compileSnapshotSteps(snapshot);
  let count = 0;
  while (!steps.next().done) count++;
  return count;
}

// A CA bundle is parsed in 80 to 150 ms: once per file set while its files stay the same, never
// per upstream, per compile or per connection.
describe("TLS files read and parsed once per file set", () => {
  let pki: TestPki;
  let server: Server;
  let port: number;
  let copies = 0;
  /** A fresh path for the CA, so the cache shared by the whole process has not seen it. */
  const freshCa = () => {
    const path = join(pki.dir, `ca-copy-${++copies}.pem`);
    copyFileSync(pki.caCert, path);
    return path;
  };

  beforeAll(async () => {
    pki = await makeTestPki();
    server = createServer(
      { cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey) },
      (_req, res) => res.end(),
    );
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    port = (server.address() as AddressInfo).port;
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await pki.remove();
  });

  it("builds one SecureContext for many upstreams, across compiles and connections", async () => {
    // On node:tls's exports, which tls.connect calls too when it is given PEM strings.
    const builds = vi.spyOn(tls, "createSecureContext");
    const snapshot = sharingOneCa(freshCa());
    const first = compileSnapshot(snapshot);
    if (!first.ok) throw new Error(first.reason);
    expect(builds).toHaveBeenCalledTimes(1);
    const again = compileSnapshot(sharingOneCa(snapshot.upstreams[0]!.tls!.caFile));
    if (!again.ok) throw new Error(again.reason);
    expect(builds).toHaveBeenCalledTimes(1);
    const upstreams = [...again.value.upstreams.values()];
    expect(new Set(upstreams.map((u) => u.tls!.secureContext)).size).toBe(1);

    const connect = tlsConnector(upstreams[0]!.tls!, 5_000);
    for (let i = 0; i < CONNECTIONS; i++) {
      const socket = await new Promise<Socket>((resolve, reject) =>
        connect(
          { hostname: "127.0.0.1", host: "127.0.0.1", protocol: "https:", port: String(port) },
          (error, connected) => (error ? reject(error) : resolve(connected as Socket)),
        ),
      );
      socket.destroy();
    }
    expect(builds).toHaveBeenCalledTimes(1);
  });

  it("counts a file set's first read in the compile's steps, not a set already read", () => {
    const paths = Array.from({ length: UPSTREAMS }, freshCa);
    const eachItsOwn = (caFiles: string[]) => {
      const each = sharingOneCa("");
      for (const [i, upstream] of each.upstreams.entries()) upstream.tls!.caFile = caFiles[i]!;
      return each;
    };
    const cold = stepsOf(eachItsOwn(paths));
    const warm = stepsOf(eachItsOwn(paths));
    // Each build ends a step (the event loop may run right after it): 20 upstreams of one node
    // each are 40 resources, less than one step, once their files are read (the last build's
    // step may end where a warm compile's would anyway).
    expect(cold - warm).toBeGreaterThanOrEqual(UPSTREAMS - 1);
  });
});
