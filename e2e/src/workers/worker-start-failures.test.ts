import { readFileSync, renameSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  DATA_PLANE_BIN,
  type DataPlane,
  describeExit,
  freePorts,
  loggedAs,
  ManagedProcess,
  metricValue,
  type NamedUpstream,
  startWorkerGateway,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
  workerPids,
} from "../support/index.js";

/** A data plane with two workers and no control plane: it never gets past binding its ports. */
async function spawnWorkerDataPlane(
  teardown: Teardown,
  name: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<ManagedProcess> {
  const [cpPort] = (await freePorts(1)) as [number];
  const child = await ManagedProcess.spawn({
    name,
    command: process.execPath,
    args: [DATA_PLANE_BIN, "--workers", "2", ...args],
    env: {
      // Nothing answers there: the data plane would dial it only once its listeners are bound.
      CLAWGATE_CP_ADDRESSES: `127.0.0.1:${cpPort}`,
      CLAWGATE_DP_ADMIN_LISTEN: "127.0.0.1:0",
      CLAWGATE_PROXY_LISTEN: "127.0.0.1:0",
      CLAWGATE_ACCESS_LOG: "off",
      CLAWGATE_NODE_ID: name,
      ...env,
    },
  });
  teardown.add(name, () => child.kill());
  return child;
}

/** Issue 19 finding 1: workers that cannot start must not fork forever under a live primary. */
describe("a data plane whose workers cannot start", () => {
  const teardown = new Teardown();
  afterAll(() => teardown.run());

  it("exits non-zero, naming the proxy port another process holds", async () => {
    const held: Server = createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    teardown.add("held port", () => new Promise<void>((resolve) => held.close(() => resolve())));
    const port = (held.address() as { port: number }).port;
    const taken = `127.0.0.1:${port}`;
    const dp = await spawnWorkerDataPlane(teardown, "dp-held-port", ["--proxy-listen", taken]);

    // Before the fix the workers were forked again and again and the primary never exited.
    const exit = await dp.exited;
    expect(describeExit(exit)).toBe("code 1");
    const [fatal] = dp.output.grep('"level":60').map((line) => JSON.parse(line));
    expect(fatal).toMatchObject({
      address: taken,
      code: "EADDRINUSE",
      msg: expect.stringContaining(`proxy cannot listen on ${taken}: EADDRINUSE`),
    });
    // The two workers of the first fork, and no replacement.
    expect(dp.output.grep('"proxy worker started"').length).toBeLessThanOrEqual(2);
  });

  it("kills a worker that never says hello, and at boot exits non-zero saying so", async () => {
    // No worker loads its code within 10 ms of its fork.
    const dp = await spawnWorkerDataPlane(teardown, "dp-no-hello", [], {
      CLAWGATE_WORKER_HELLO_TIMEOUT_MS: "10",
    });
    const exit = await dp.exited;
    expect(describeExit(exit)).toBe("code 1");
    expect(dp.output.grep("no hello within 10 ms of its fork").length).toBeGreaterThan(0);
  });
});

describe("a data plane whose replacement workers cannot start", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let cp: ControlPlane;
  let dp: DataPlane;
  let upstreamAddress: string;
  type Death = { pid: number; signal: string | null; restartInMs: number; reason?: string };
  const deaths = () => loggedAs<Death>(dp, "proxy worker died; starting another");

  afterAll(() => teardown.run());

  it("forks them again with a doubling delay, and serves with both once they can", async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    const [tlsPort] = (await freePorts(1)) as [number];
    let upstreams: Record<string, NamedUpstream>;
    ({ cp, dp, upstreams } = await startWorkerGateway(teardown, {
      store: "embedded",
      dataPlaneEnv: {
        CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
        CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
        CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
      },
    }));
    upstreamAddress = upstreams.a!.address;
    // The key file gone (a renewal half done): a new worker cannot load its certificate.
    const key = readFileSync(pki.serverKey);
    const aside = `${pki.serverKey}.aside`;
    renameSync(pki.serverKey, aside);
    const [victim] = workerPids(dp) as [number];
    process.kill(victim, "SIGKILL");

    await waitFor(() => deaths().length >= 5, {
      what: "five worker deaths",
      timeoutMs: 60_000,
    });
    renameSync(aside, pki.serverKey);
    expect(readFileSync(pki.serverKey)).toEqual(key);

    const [killed, ...failed] = deaths();
    // The first death after serving is replaced at once, then each that cannot start waits
    // twice as long as the one before.
    expect(killed).toMatchObject({ pid: victim, signal: "SIGKILL", restartInMs: 0 });
    expect(failed.slice(0, 4).map((death) => death.restartInMs)).toEqual([100, 200, 400, 800]);
    for (const death of failed) expect(death.reason).toContain(pki.serverKey);
    // The file back, the next fork serves: two workers again.
    await waitForWorkers(dp, 2, "a replacement worker listening once the key is back");
  }, 240_000);

  it("a replacement that cannot compile the snapshot served exits instead of listening", async () => {
    // An upstream no route uses, its CA file read by every compile of the snapshot.
    const write = await cp.admin.putUpstream("c", {
      nodes: [{ address: upstreamAddress }],
      tls: { caFile: pki.caCert },
    });
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1, timeoutMs: 60_000 });
    const aside = `${pki.caCert}.aside`;
    renameSync(pki.caCert, aside);
    const before = deaths().length;
    const [victim] = workerPids(dp).slice(-1) as [number];
    process.kill(victim, "SIGKILL");
    await waitFor(() => deaths().length >= before + 3, {
      what: "the replacements to exit",
      timeoutMs: 60_000,
    });
    // Before the fix the replacement listened with no snapshot to serve, counted as a worker.
    expect(metricValue(await dp.metrics(), "clawgate_workers")).toBe(1);
    renameSync(aside, pki.caCert);
    const refused = deaths().slice(before + 1);
    for (const death of refused) {
      expect(death.reason).toContain("initial snapshot refused");
      expect(death.reason).toContain(pki.caCert);
    }
    await waitForWorkers(dp, 2, "a replacement worker listening once the CA file is back");
  }, 240_000);
});
