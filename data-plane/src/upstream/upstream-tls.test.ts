import { once } from "node:events";
import { readFileSync } from "node:fs";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { request } from "node:http";
import { createServer, type ServerOptions } from "node:https";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import type { TLSSocket } from "node:tls";
import { create, SnapshotSchema, type UpstreamTls } from "@clawgate/proto";
import { issueServerCertificate, makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";
import { ProxyMetrics } from "../metrics/proxy-metrics.js";
import { createProxyHandler } from "../proxy/proxy-handler.js";
import { closeLoopbackServer, listenOnLoopback } from "../testing/loopback-server.js";
import { PoolRegistry } from "./pool-registry.js";

/** What an HTTPS test upstream saw of a request: SNI, Host and the client certificate's CN. */
interface Seen {
  servername: string | false | null;
  host: string | undefined;
  clientCn: string | string[] | undefined;
}

async function httpsUpstream(options: ServerOptions): Promise<{ server: Server; port: number }> {
  const server = createServer(options, (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as TLSSocket;
    const peer = socket.getPeerCertificate();
    const seen: Seen = {
      servername: socket.servername,
      host: req.headers.host,
      clientCn: peer?.subject?.CN,
    };
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(seen));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server: server as unknown as Server, port: (server.address() as AddressInfo).port };
}

function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

// Real TLS between the proxy and its upstreams, with throwaway certificates from openssl: the
// right CA is served, a wrong one is refused as its own failure kind, mutual TLS presents the
// client certificate, and serverName drives both SNI and Host.
describe("TLS to upstreams", () => {
  let pki: TestPki;
  let plain: { server: Server; port: number };
  let mutual: { server: Server; port: number };
  let named: { server: Server; port: number };
  let proxy: { server: Server; port: number };
  const pools = new PoolRegistry();
  const registry = new Registry();
  const logLines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "warn" },
    new Writable({
      write(chunk, _encoding, done) {
        logLines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  );
  let compiled: CompiledSnapshot;

  function upstream(
    name: string,
    port: number,
    tls: Omit<Partial<UpstreamTls>, "$typeName">,
    hostRewrite = false,
  ) {
    return {
      name,
      nodes: [{ address: `127.0.0.1:${port}`, weight: 1 }],
      tls: { enabled: true, ...tls },
      hostRewrite,
    };
  }

  beforeAll(async () => {
    pki = await makeTestPki();
    const named_ = await issueServerCertificate(pki, "api-test", "DNS:api.test");
    const key = (path: string) => readFileSync(path);
    plain = await httpsUpstream({ cert: key(pki.serverCert), key: key(pki.serverKey) });
    mutual = await httpsUpstream({
      cert: key(pki.serverCert),
      key: key(pki.serverKey),
      ca: key(pki.caCert),
      requestCert: true,
      rejectUnauthorized: true,
    });
    named = await httpsUpstream({ cert: key(named_.cert), key: key(named_.key) });
    const result = compileSnapshot(
      create(SnapshotSchema, {
        version: 1n,
        upstreams: [
          upstream("right-ca", plain.port, { caFile: pki.caCert }),
          upstream("wrong-ca", plain.port, { caFile: pki.otherCaCert }),
          upstream("unverified", plain.port, { caFile: pki.otherCaCert, insecureSkipVerify: true }),
          upstream("mtls", mutual.port, {
            caFile: pki.caCert,
            clientCertFile: pki.clientCert,
            clientKeyFile: pki.clientKey,
          }),
          upstream("mtls-no-cert", mutual.port, { caFile: pki.caCert }),
          upstream("named", named.port, { caFile: pki.caCert, serverName: "api.test" }),
          upstream("rewrite", plain.port, { caFile: pki.caCert }, true),
          upstream("wrong-name", named.port, { caFile: pki.caCert, serverName: "other.test" }),
          // A node by DNS name, resolved when each connection is opened, as a public API is.
          {
            name: "by-name",
            nodes: [{ address: `localhost:${plain.port}`, weight: 1 }],
            tls: { enabled: true, caFile: pki.caCert },
            hostRewrite: true,
          },
        ],
        routes: [
          "right-ca",
          "wrong-ca",
          "unverified",
          "mtls",
          "mtls-no-cert",
          "named",
          "rewrite",
          "by-name",
          "wrong-name",
        ].map((name) => ({
          name,
          match: { pathPrefix: `/${name}` },
          upstream: name,
          retry: { attempts: 0 },
        })),
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    compiled = result.value;
    const handler = createProxyHandler({
      current: () => compiled,
      pools,
      metrics: new ProxyMetrics(registry),
      logger,
    });
    proxy = await listenOnLoopback(handler);
  });

  afterAll(async () => {
    await closeLoopbackServer(proxy.server);
    await pools.close();
    for (const s of [plain, mutual, named]) await closeLoopbackServer(s.server);
    await pki.remove();
  });

  async function tlsErrors(upstreamName: string): Promise<number> {
    const metric = await registry.getSingleMetric("clawgate_upstream_errors_total")!.get();
    const sample = metric.values.find(
      (v) => v.labels.upstream === upstreamName && v.labels.kind === "tls",
    );
    return sample?.value ?? 0;
  }

  it("serves an HTTPS upstream whose certificate the configured CA signed", async () => {
    const reply = await get(proxy.port, "/right-ca");
    expect(reply.status).toBe(200);
    // An IP literal node gets no SNI (RFC 6066), and the client's Host is kept.
    const seen = JSON.parse(reply.body) as Seen;
    expect(seen.servername).toBe(false);
    expect(seen.host).toBe(`127.0.0.1:${proxy.port}`);
  });

  it("refuses a certificate from another CA: 502 without internals, kind tls in log and metric", async () => {
    const reply = await get(proxy.port, "/wrong-ca");
    expect(reply.status).toBe(502);
    const body = JSON.parse(reply.body) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("CLAWGATE_UPSTREAM_CONNECT_FAILED");
    expect(reply.body).not.toMatch(/certificate|UNABLE_TO|verify/i);
    expect(await tlsErrors("wrong-ca")).toBe(1);
    const line = logLines.find((l) => l.upstream === "wrong-ca");
    expect(line?.kind).toBe("tls");
    expect(line?.msg).toBe("upstream request failed: tls");
  });

  it("accepts any certificate with verify off", async () => {
    expect((await get(proxy.port, "/unverified")).status).toBe(200);
  });

  it("presents the client certificate to an upstream that requires one", async () => {
    const reply = await get(proxy.port, "/mtls");
    expect(reply.status).toBe(200);
    expect((JSON.parse(reply.body) as Seen).clientCn).toBe("data-plane");
    const refused = await get(proxy.port, "/mtls-no-cert");
    expect(refused.status).toBe(502);
    expect(await tlsErrors("mtls-no-cert")).toBe(1);
  });

  it("sends tls.serverName as SNI and Host, and checks the certificate against it", async () => {
    const reply = await get(proxy.port, "/named");
    expect(reply.status).toBe(200);
    const seen = JSON.parse(reply.body) as Seen;
    expect(seen.servername).toBe("api.test");
    expect(seen.host).toBe("api.test");
    // A certificate the right CA signed, for another name, is refused all the same.
    expect((await get(proxy.port, "/wrong-name")).status).toBe(502);
    expect(await tlsErrors("wrong-name")).toBe(1);
  });

  it("sends the node's host:port as Host with hostRewrite", async () => {
    const seen = JSON.parse((await get(proxy.port, "/rewrite")).body) as Seen;
    expect(seen.host).toBe(`127.0.0.1:${plain.port}`);
  });

  it("dials a node by DNS name with that name as SNI and, with hostRewrite, as Host", async () => {
    const reply = await get(proxy.port, "/by-name");
    expect(reply.status).toBe(200);
    const seen = JSON.parse(reply.body) as Seen;
    expect(seen.servername).toBe("localhost");
    expect(seen.host).toBe(`localhost:${plain.port}`);
  });
});
