import { once } from "node:events";
import { readFileSync } from "node:fs";
import { connect as h2Connect } from "node:http2";
import type { AddressInfo } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_LISTENER_LIMITS } from "../testing/listener-limits-fixture.js";
import { ProxyTlsCertificates } from "./proxy-tls-certificates.js";
import { createProxyTlsListener } from "./proxy-tls-listener.js";

describe("the TLS listener's drain", () => {
  let pki: TestPki;
  let ca: string;

  beforeAll(async () => {
    pki = await makeTestPki();
    ca = readFileSync(pki.caCert, "utf8");
  });
  afterAll(() => pki.remove());

  it("lets an HTTP/2 stream in flight finish, closes an idle HTTP/1.1 connection, then stops", async () => {
    const certificates = new ProxyTlsCertificates({
      defaultFiles: { certFile: pki.serverCert, keyFile: pki.serverKey },
      sniFiles: [],
      logger: pino({ level: "silent" }),
    });
    // /slow answers only when the test says so: a request still running when the drain begins.
    let finishSlow: (() => void) | undefined;
    const listener = createProxyTlsListener(
      certificates,
      (req, res) => {
        if (req.url === "/slow") finishSlow = () => res.end("slow done");
        else res.end("quick");
      },
      DEFAULT_LISTENER_LIMITS,
    );
    listener.server.listen(0, "127.0.0.1");
    await once(listener.server, "listening");
    const port = (listener.server.address() as AddressInfo).port;

    const idle = tlsConnect({ host: "127.0.0.1", port, ca, servername: "localhost" });
    await once(idle, "secureConnect");
    const idleClosed = once(idle, "close");

    const session = h2Connect(`https://127.0.0.1:${port}`, { ca, servername: "localhost" });
    const stream = session.request({ ":path": "/slow" });
    stream.setEncoding("utf8");
    let body = "";
    stream.on("data", (chunk: string) => {
      body += chunk;
    });
    const ended = once(stream, "end");
    while (finishSlow === undefined) await new Promise((resolve) => setImmediate(resolve));

    const goaway = once(session, "goaway");
    const drained = listener.drain.drain(30_000);
    await idleClosed;
    // The session got its GOAWAY; the stream it carries is still served.
    await goaway;
    finishSlow();
    await ended;
    expect(body).toBe("slow done");
    expect(await drained).toEqual({ drained: true, cut: 0 });
    session.destroy();
    certificates.close();
  });
});
