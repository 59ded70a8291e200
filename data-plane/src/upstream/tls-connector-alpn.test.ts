import { once } from "node:events";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { createServer, type Server, type TLSSocket } from "node:tls";
import { create, SnapshotSchema } from "@clawgate/proto";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import { tlsConnector } from "./tls-connector.js";

// The README says what an http2 upstream offers: undici's order, http/1.1 then h2. A server
// that picks by its own preference (most do) picks h2 if it prefers it; one that honours the
// client's order picks HTTP/1.1.
describe("ALPN offered to an http2 upstream", () => {
  let pki: TestPki;
  let server: Server;
  let port: number;
  let offered: string[] = [];

  beforeAll(async () => {
    pki = await makeTestPki();
    server = createServer({
      cert: readFileSync(pki.serverCert),
      key: readFileSync(pki.serverKey),
      // The client's first protocol the server speaks: the client's preference wins.
      ALPNCallback: ({ protocols }) => {
        offered = protocols;
        return protocols.find((protocol) => protocol === "h2" || protocol === "http/1.1");
      },
    });
    server.on("secureConnection", (socket) => socket.end());
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.close();
    await pki.remove();
  });

  it("offers http/1.1, then h2, as the README says", async () => {
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [
          {
            name: "api",
            nodes: [{ address: `127.0.0.1:${port}`, weight: 1 }],
            tls: { enabled: true, caFile: pki.caCert },
            http2: true,
          },
        ],
        routes: [{ name: "r", match: { pathPrefix: "/" }, upstream: "api" }],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const connect = tlsConnector(result.value.upstreams.get("api")!.tls!, 5_000, true);
    const socket = await new Promise<TLSSocket>((resolve, reject) =>
      connect(
        { hostname: "127.0.0.1", host: "127.0.0.1", protocol: "https:", port: String(port) },
        (error, connected) => (error ? reject(error) : resolve(connected as TLSSocket)),
      ),
    );
    socket.destroy();
    expect(offered).toEqual(["http/1.1", "h2"]);
    expect(socket.alpnProtocol).toBe("http/1.1");
  });
});
