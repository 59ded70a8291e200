import { EventEmitter, once } from "node:events";
import { copyFileSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Writable } from "node:stream";
import { connect, type TLSSocket } from "node:tls";
import { isConfigError } from "@clawgate/runtime";
import { issueServerCertificate, makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../config/load-config.js";
import { DEFAULT_LISTENER_LIMITS } from "../testing/listener-limits-fixture.js";
import { ProxyTlsCertificates } from "./proxy-tls-certificates.js";
import {
  createProxyTlsListener,
  loadProxyTlsCertificates,
  type ProxyTlsListener,
} from "./proxy-tls-listener.js";

/** Log lines as they are written; `next(msg)` resolves on the next line with that message. */
class LogLines extends EventEmitter {
  readonly stream = new Writable({
    write: (chunk, _encoding, done) => {
      const line = JSON.parse(String(chunk)) as Record<string, unknown>;
      this.emit("line", line);
      done();
    },
  });

  next(msg: string): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      const onLine = (line: Record<string, unknown>) => {
        if (line.msg !== msg) return;
        this.off("line", onLine);
        resolve(line);
      };
      this.on("line", onLine);
    });
  }
}

interface Connected {
  socket: TLSSocket;
  fingerprint: string;
  names: string;
}

describe("the proxy's TLS listener", () => {
  let pki: TestPki;
  let ca: string;
  let dir: string;
  let listener: ProxyTlsListener;
  let port: number;
  const logs = new LogLines();
  const sockets: TLSSocket[] = [];

  async function connectTo(servername?: string, alpn: string[] = ["http/1.1"]): Promise<Connected> {
    const socket = connect({
      host: "127.0.0.1",
      port,
      ca,
      ...(servername === undefined ? {} : { servername }),
      // Names are checked by the test, against what it asked for.
      checkServerIdentity: () => undefined,
      // HTTP/1.1 unless asked: the exchanges below are written as raw HTTP/1.1.
      ALPNProtocols: alpn,
    });
    sockets.push(socket);
    await once(socket, "secureConnect");
    const peer = socket.getPeerCertificate();
    return { socket, fingerprint: peer.fingerprint256, names: peer.subjectaltname ?? "" };
  }

  /** One HTTP/1.1 request on an open connection; resolves with the response text. */
  async function exchange(socket: TLSSocket): Promise<string> {
    socket.write("GET / HTTP/1.1\r\nhost: test\r\n\r\n");
    let text = "";
    while (!text.endsWith("served")) {
      const [chunk] = (await once(socket, "data")) as [Buffer];
      text += chunk.toString("utf8");
    }
    return text;
  }

  beforeAll(async () => {
    pki = await makeTestPki();
    dir = pki.dir;
    ca = readFileSync(pki.caCert, "utf8");
    const a = await issueServerCertificate(pki, "a-test", "DNS:a.test");
    const b = await issueServerCertificate(pki, "wild-b", "DNS:*.b.test");
    // The default certificate is served from copies the test later replaces.
    copyFileSync(pki.serverCert, join(dir, "live.crt"));
    copyFileSync(pki.serverKey, join(dir, "live.key"));
    const certificates = new ProxyTlsCertificates({
      defaultFiles: { certFile: join(dir, "live.crt"), keyFile: join(dir, "live.key") },
      sniFiles: [
        { certFile: a.cert, keyFile: a.key },
        { certFile: b.cert, keyFile: b.key },
      ],
      logger: pino({ level: "info" }, logs.stream),
      pollIntervalMs: 50,
    });
    listener = createProxyTlsListener(
      certificates,
      (_req, res) => {
        res.setHeader("content-length", "6");
        res.end("served");
      },
      DEFAULT_LISTENER_LIMITS,
    );
    listener.server.listen(0, "127.0.0.1");
    await once(listener.server, "listening");
    port = (listener.server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    listener.certificates.close();
    // The drain with no time left cuts whatever is still open.
    await listener.drain.drain(0);
    await pki.remove();
  });

  it("chooses the certificate by SNI name: exact, then wildcard, else the default", async () => {
    expect((await connectTo("a.test")).names).toBe("DNS:a.test");
    expect((await connectTo("A.Test")).names).toBe("DNS:a.test");
    expect((await connectTo("x.b.test")).names).toBe("DNS:*.b.test");
    // A wildcard covers one label only.
    expect((await connectTo("y.x.b.test")).names).toBe("IP Address:127.0.0.1, DNS:localhost");
    expect((await connectTo("other.test")).names).toBe("IP Address:127.0.0.1, DNS:localhost");
    // No SNI at all (a client dialling an IP address).
    expect((await connectTo()).names).toBe("IP Address:127.0.0.1, DNS:localhost");
  });

  it("speaks TLS 1.2 or later, h2 to clients that offer it and http/1.1 to the others", async () => {
    const both = await connectTo("a.test", ["h2", "http/1.1"]);
    expect(both.socket.alpnProtocol).toBe("h2");
    const { socket } = await connectTo("a.test");
    expect(socket.alpnProtocol).toBe("http/1.1");
    expect(["TLSv1.2", "TLSv1.3"]).toContain(socket.getProtocol());
    expect(await exchange(socket)).toContain("HTTP/1.1 200 OK");
  });

  it("serves a changed certificate to new connections while an open one keeps working", async () => {
    const before = await connectTo();
    expect(await exchange(before.socket)).toContain("200 OK");
    const renewed = await issueServerCertificate(pki, "renewed", "IP:127.0.0.1, DNS:renewed.test");
    const reloaded = logs.next("proxy TLS certificate reloaded");
    // Written beside the live files and renamed over them, as certbot or a secret volume does.
    renameSync(renewed.key, join(dir, "live.key"));
    renameSync(renewed.cert, join(dir, "live.crt"));
    const line = await reloaded;
    expect(line.certFile).toBe(join(dir, "live.crt"));
    const after = await connectTo();
    expect(after.names).toBe("IP Address:127.0.0.1, DNS:renewed.test");
    expect(after.fingerprint).not.toBe(before.fingerprint);
    // The connection opened before the change is still up and still answers.
    expect(await exchange(before.socket)).toContain("200 OK");
    expect(before.socket.getPeerCertificate().fingerprint256).toBe(before.fingerprint);
  });

  it("refuses a broken new certificate with a warning and keeps serving the previous one", async () => {
    const serving = (await connectTo()).fingerprint;
    const refused = logs.next(
      "proxy TLS certificate change refused; the previous certificate keeps serving",
    );
    writeFileSync(join(dir, "live.crt"), "not a certificate\n");
    const line = await refused;
    expect(line.reason).toBe(`${join(dir, "live.crt")} holds no PEM certificate`);
    expect(line.level).toBe(40);
    const after = await connectTo();
    expect(after.fingerprint).toBe(serving);
    expect(await exchange(after.socket)).toContain("200 OK");
  });

  it("refuses at boot, naming the setting, a certificate it cannot serve", () => {
    const boot = (certFile: string, sniFiles: { certFile: string; keyFile: string }[] = []) => {
      try {
        new ProxyTlsCertificates({
          defaultFiles: { certFile, keyFile: pki.serverKey },
          sniFiles,
          logger: pino({ level: "silent" }),
        });
      } catch (error) {
        if (isConfigError(error)) return error.message;
        throw error;
      }
      return "started";
    };
    expect(boot(pki.serverCert)).toBe("started");
    expect(boot(join(dir, "missing.crt"))).toContain(
      `proxyTlsCertFile = "${join(dir, "missing.crt")}"`,
    );
    expect(boot(pki.clientCert)).toContain("is not the key of the certificate");
    // A certificate without DNS names could never be chosen by SNI.
    expect(boot(pki.serverCert, [{ certFile: pki.clientCert, keyFile: pki.clientKey }])).toContain(
      "proxyTlsCertificates",
    );
  });
  it("names the layer a certificate it cannot serve came from", () => {
    const missing = join(dir, "missing.crt");
    const config = loadConfig({
      argv: ["--proxy-tls-listen", "127.0.0.1:0", "--proxy-tls-key-file", pki.serverKey],
      env: { CLAWGATE_PROXY_TLS_CERT_FILE: missing },
    });
    expect(() => loadProxyTlsCertificates(config, pino({ level: "silent" }))).toThrow(
      `proxyTlsCertFile = "${missing}" (from env CLAWGATE_PROXY_TLS_CERT_FILE)`,
    );
  });
});
