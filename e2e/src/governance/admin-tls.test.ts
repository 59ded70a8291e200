import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { makeTestPki, type TestPki } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONTROL_PLANE_BIN,
  freePorts,
  httpStatus,
  ManagedProcess,
  makeWorkDir,
  removeWorkDir,
  runClawctl,
  runToExit,
  Teardown,
  waitFor,
} from "../support/index.js";

describe("the admin API over TLS (throwaway openssl PKI)", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let server: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("pki", () => pki.remove());
    const dir = await makeWorkDir("admin-tls");
    teardown.add("work dir", () => removeWorkDir(dir));
    const [adminPort, grpcPort] = await freePorts(2);
    const token = randomBytes(16).toString("hex");
    // startControlPlane probes over plain HTTP, so this one is started and awaited here.
    const cp = await ManagedProcess.spawn({
      name: "control-plane",
      command: process.execPath,
      args: [CONTROL_PLANE_BIN],
      cwd: dir,
      env: {
        CLAWGATE_ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
        CLAWGATE_GRPC_LISTEN: `127.0.0.1:${grpcPort}`,
        CLAWGATE_ADMIN_TOKEN: token,
        CLAWGATE_STORE_PATH: join(dir, "store.json"),
        CLAWGATE_ADMIN_TLS_CERT_FILE: pki.serverCert,
        CLAWGATE_ADMIN_TLS_KEY_FILE: pki.serverKey,
      },
    });
    teardown.add("control plane", () => cp.stop());
    await waitFor(
      () => {
        cp.assertRunning();
        return cp.output.text(200).includes('"tls":true');
      },
      { what: "the admin API to listen with TLS", timeoutMs: 20_000 },
    );
    server = `https://127.0.0.1:${adminPort}`;
    env = { CLAWGATE_ADMIN_URL: server, CLAWGATE_ADMIN_TOKEN: token };
  });
  afterAll(() => teardown.run());

  it("serves clawctl over https when it trusts the CA (--ca-file)", async () => {
    const run = await runClawctl(["--ca-file", pki.caCert, "get", "routes"], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe("No routes found.\n");
    const viaEnv = await runClawctl(["snapshot"], { ...env, CLAWGATE_ADMIN_CA_FILE: pki.caCert });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
  });

  it("fails clawctl without the CA, and plain HTTP on the TLS port gets no answer", async () => {
    const untrusted = await runClawctl(["get", "routes"], env);
    expect(untrusted.code).toBe(1);
    expect(untrusted.stderr).toMatch(/cannot reach the admin API at https:.*certificate/);
    expect(await httpStatus(`${server.replace("https:", "http:")}/healthz`)).not.toBe(200);
  });

  it("refuses a CA file that holds no certificate, naming the option", async () => {
    const run = await runClawctl(["--ca-file", pki.serverKey, "get", "routes"], env);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`--ca-file ${pki.serverKey} holds no PEM certificate`);
  });

  it("exits 2 naming the setting when only the certificate is given", async () => {
    const run = await runToExit(teardown, CONTROL_PLANE_BIN, [], {
      CLAWGATE_ADMIN_TOKEN: "0123456789abcdef0123",
      CLAWGATE_ADMIN_TLS_CERT_FILE: pki.serverCert,
    });
    expect(run.code).toBe(2);
    expect(run.output).toContain("adminTlsCertFile");
    expect(run.output).toContain("set adminTlsKeyFile with it");
  });
});
