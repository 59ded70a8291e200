import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** PEM file paths of a throwaway PKI, all inside `dir`. */
export interface TestPki {
  dir: string;
  /** The CA that signed the server and client certificates. */
  caCert: string;
  /** Server certificate for 127.0.0.1 and localhost (serverAuth). */
  serverCert: string;
  serverKey: string;
  /** Server certificate for the name localhost only: no IP SAN, so dialling 127.0.0.1 must fail. */
  dnsOnlyServerCert: string;
  dnsOnlyServerKey: string;
  /** Client certificate (clientAuth), CN=data-plane. */
  clientCert: string;
  clientKey: string;
  /** A second, unrelated CA, and a client certificate it signed. */
  otherCaCert: string;
  otherClientCert: string;
  otherClientKey: string;
  /** Deletes `dir`; safe to call twice. */
  remove(): Promise<void>;
}

// Given with -config so the system's openssl.cnf (which differs between distributions) adds no
// extensions of its own.
const REQ_CONFIG = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n";
const SERVER_EXT = [
  "basicConstraints = critical, CA:FALSE",
  "keyUsage = critical, digitalSignature, keyEncipherment",
  "extendedKeyUsage = serverAuth",
  "subjectAltName = IP:127.0.0.1, DNS:localhost",
].join("\n");
const DNS_ONLY_SERVER_EXT = SERVER_EXT.replace("IP:127.0.0.1, ", "");
const CLIENT_EXT = [
  "basicConstraints = critical, CA:FALSE",
  "keyUsage = critical, digitalSignature, keyEncipherment",
  "extendedKeyUsage = clientAuth",
].join("\n");

/**
 * Makes a CA, a server and a client certificate it signed, and a second CA with a client of
 * its own, in a new temp dir, with the `openssl` command. EC P-256 keys, valid one day.
 */
export async function makeTestPki(): Promise<TestPki> {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-pki-"));
  const path = (name: string) => join(dir, name);
  try {
    await writeFile(path("req.cnf"), REQ_CONFIG);
    await writeFile(path("server.ext"), `${SERVER_EXT}\n`);
    await writeFile(path("dns-only-server.ext"), `${DNS_ONLY_SERVER_EXT}\n`);
    await writeFile(path("client.ext"), `${CLIENT_EXT}\n`);
    await makeCa(dir, "ca", "clawgate test CA");
    await makeCa(dir, "other-ca", "unrelated test CA");
    await makeLeaf(dir, "server", "localhost", "ca", "server.ext");
    await makeLeaf(dir, "dns-only-server", "localhost", "ca", "dns-only-server.ext");
    await makeLeaf(dir, "client", "data-plane", "ca", "client.ext");
    await makeLeaf(dir, "other-client", "data-plane", "other-ca", "client.ext");
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    dir,
    caCert: path("ca.crt"),
    serverCert: path("server.crt"),
    serverKey: path("server.key"),
    dnsOnlyServerCert: path("dns-only-server.crt"),
    dnsOnlyServerKey: path("dns-only-server.key"),
    clientCert: path("client.crt"),
    clientKey: path("client.key"),
    otherCaCert: path("other-ca.crt"),
    otherClientCert: path("other-client.crt"),
    otherClientKey: path("other-client.key"),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

async function makeCa(dir: string, name: string, commonName: string): Promise<void> {
  await openssl(dir, [
    ...["req", "-x509", "-config", "req.cnf", "-nodes", "-days", "1"],
    ...["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
    ...["-keyout", `${name}.key`, "-out", `${name}.crt`, "-subj", `/CN=${commonName}`],
    ...["-addext", "basicConstraints=critical,CA:TRUE"],
    ...["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
  ]);
}

async function makeLeaf(
  dir: string,
  name: string,
  commonName: string,
  ca: string,
  extensions: string,
): Promise<void> {
  await openssl(dir, [
    ...["req", "-new", "-config", "req.cnf", "-nodes"],
    ...["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
    ...["-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${commonName}`],
  ]);
  await openssl(dir, [
    ...["x509", "-req", "-in", `${name}.csr`, "-days", "1", "-set_serial", randomSerial()],
    ...["-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-extfile", extensions],
    ...["-out", `${name}.crt`],
  ]);
}

/**
 * Issues one more server certificate (serverAuth, EC P-256) signed by the PKI's CA, or by its
 * unrelated CA with `ca: "other-ca"`, for the names in `subjectAltName` ("DNS:a.test, IP:127.0.0.1").
 * Files `<name>.crt` and `<name>.key` in the PKI's dir; an existing pair is overwritten in place,
 * as a renewal would.
 */
export async function issueServerCertificate(
  pki: TestPki,
  name: string,
  subjectAltName: string,
  options: { ca?: "ca" | "other-ca" } = {},
): Promise<{ cert: string; key: string }> {
  const extensions = `${name}.ext`;
  await writeFile(
    join(pki.dir, extensions),
    `${SERVER_EXT.replace(/subjectAltName = .*/, `subjectAltName = ${subjectAltName}`)}\n`,
  );
  await makeLeaf(pki.dir, name, name, options.ca ?? "ca", extensions);
  return { cert: join(pki.dir, `${name}.crt`), key: join(pki.dir, `${name}.key`) };
}

function randomSerial(): string {
  return String(Math.floor(Math.random() * 2 ** 48) + 1);
}

async function openssl(cwd: string, args: string[]): Promise<void> {
  try {
    await run("openssl", args, { cwd });
  } catch (error) {
    const failed = error as NodeJS.ErrnoException & { stderr?: string };
    if (failed.code === "ENOENT") {
      throw new Error(
        "the openssl command is not on PATH; the TLS tests need it to make their certificates " +
          "(apt-get install openssl)",
      );
    }
    throw new Error(`openssl ${args.join(" ")} failed: ${failed.stderr ?? failed.message}`);
  }
}
