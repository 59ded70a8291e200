import { once } from "node:events";
import { readFileSync } from "node:fs";
import { connect as h2Connect } from "node:http2";
import type { AddressInfo } from "node:net";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_LISTENER_LIMITS } from "../testing/listener-limits-fixture.js";
import { ProxyTlsCertificates } from "./proxy-tls-certificates.js";
import { createProxyTlsListener } from "./proxy-tls-listener.js";

describe("the TLS listener's limits", () => {
  let pki: TestPki;

  beforeAll(async () => {
    pki = await makeTestPki();
  });
  afterAll(() => pki.remove());

  it("advertises proxyMaxConcurrentStreams as HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS, and applies the HTTP/1.1 timeouts", async () => {
    const certificates = new ProxyTlsCertificates({
      defaultFiles: { certFile: pki.serverCert, keyFile: pki.serverKey },
      sniFiles: [],
      logger: pino({ level: "silent" }),
    });
    const listener = createProxyTlsListener(certificates, (_req, res) => res.end("ok"), {
      ...DEFAULT_LISTENER_LIMITS,
      proxyHeadersTimeoutMs: 7_000,
      proxyRequestTimeoutMs: 70_000,
      proxyMaxConnections: 500,
      proxyMaxConcurrentStreams: 100,
    });
    listener.server.listen(0, "127.0.0.1");
    await once(listener.server, "listening");
    const port = (listener.server.address() as AddressInfo).port;
    const session = h2Connect(`https://127.0.0.1:${port}`, {
      ca: readFileSync(pki.caCert, "utf8"),
      servername: "localhost",
    });
    const [settings] = (await once(session, "remoteSettings")) as [
      { maxConcurrentStreams?: number },
    ];
    // Node's own default is 2^32 - 1: one connection could hold any number of requests.
    expect(settings.maxConcurrentStreams).toBe(100);
    const http1 = listener.server as unknown as { headersTimeout: number; requestTimeout: number };
    expect(http1.headersTimeout).toBe(7_000);
    expect(http1.requestTimeout).toBe(70_000);
    expect(listener.server.maxConnections).toBe(500);
    session.destroy();
    listener.server.close();
    certificates.close();
  });
});
