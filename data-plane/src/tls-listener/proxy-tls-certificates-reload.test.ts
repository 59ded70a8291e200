import { closeSync, copyFileSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import { createServer, type Server } from "node:tls";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { StableFilePoll } from "../file-watch/stable-file-poll.js";
import { ProxyTlsCertificates } from "./proxy-tls-certificates.js";

const REFUSED = "proxy TLS certificate change refused; the previous certificate keeps serving";
const RELOADED = "proxy TLS certificate reloaded";

// The listener's files are polled by hand here (no timer): each step below is one poll.
describe("the proxy listener's certificate reload", () => {
  let pki: TestPki;
  let n = 0;
  let certificates: ProxyTlsCertificates | undefined;
  const servers: Server[] = [];

  /** Certificates served from fresh copies of the test PKI's server pair, and their log. */
  function start(): {
    certFile: string;
    poll: StableFilePoll;
    certificates: ProxyTlsCertificates;
    logged: () => string[];
  } {
    const certFile = join(pki.dir, `live-${++n}.crt`);
    const keyFile = join(pki.dir, `live-${n}.key`);
    copyFileSync(pki.serverCert, certFile);
    copyFileSync(pki.serverKey, keyFile);
    const lines: { msg: string; reason?: string }[] = [];
    const poll = new StableFilePoll({ schedule: () => () => {} });
    certificates = new ProxyTlsCertificates({
      defaultFiles: { certFile, keyFile },
      sniFiles: [],
      logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
      poll,
    });
    return {
      certFile,
      poll,
      certificates,
      logged: () => lines.map((line) => (line.reason ? `${line.msg}: ${line.reason}` : line.msg)),
    };
  }

  function serve(listening: ProxyTlsCertificates): Server {
    const server = createServer(listening.serverOptions());
    servers.push(server);
    listening.watch(server);
    return server;
  }

  beforeAll(async () => {
    pki = await makeTestPki();
  });
  afterEach(() => certificates?.close());
  afterAll(async () => {
    for (const server of servers) server.close();
    await pki.remove();
  });

  it("never reads a certificate rewritten in place between its writes", () => {
    const { certFile, poll, certificates, logged } = start();
    serve(certificates);
    poll.poll();
    const pem = readFileSync(pki.serverCert, "utf8");
    const fd = openSync(certFile, "w");
    writeSync(fd, pem.slice(0, pem.length / 2));
    poll.poll();
    writeSync(fd, pem.slice(pem.length / 2));
    closeSync(fd);
    poll.poll();
    poll.poll();
    // The first half alone does not parse: read between the writes, it would have been refused.
    expect(logged()).toEqual([RELOADED]);
  });

  it("keeps the last good certificate when one is cut short, warning once naming the file", () => {
    const { certFile, poll, certificates, logged } = start();
    serve(certificates);
    const serving = certificates.contextFor("");
    const pem = readFileSync(pki.serverCert, "utf8");
    const fd = openSync(certFile, "w");
    writeSync(fd, pem.slice(0, pem.length / 2));
    closeSync(fd);
    for (let i = 0; i < 4; i++) poll.poll();
    expect(logged()).toHaveLength(1);
    expect(logged()[0]).toContain(`${REFUSED}: ${certFile} does not parse`);
    expect(logged()[0]).not.toContain(pem.slice(100, 140));
    expect(certificates.contextFor("")).toBe(serving);
  });

  it("reloads a renewal made between the boot read and the watch's first poll", () => {
    const { certFile, poll, certificates, logged } = start();
    // Renewed (here: the same pair, a new inode) after the read, before the watch starts.
    copyFileSync(pki.serverCert, `${certFile}.new`);
    renameSync(`${certFile}.new`, certFile);
    serve(certificates);
    poll.poll();
    poll.poll();
    expect(logged()).toEqual([RELOADED]);
  });
});
