import { copyFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  type NamedUpstream,
  type NamedUpstreamReply,
  send,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
} from "./support/index.js";

// An upstream's CA file changes on the data plane's disk, with no new snapshot from the control
// plane: the data plane reads it again and rebuilds that upstream's pools; a broken file is
// refused with a warning and the pools built from the previous files keep serving.
describe("upstream TLS files reloaded when they change", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let cp: ControlPlane;
  let dp: DataPlane;
  let node: NamedUpstream;
  let liveCa = "";

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    node = await startNamedUpstream("secure", {
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    teardown.add("upstream secure", () => node.close());
    // The data plane starts trusting the wrong CA: the node's certificate is refused.
    liveCa = join(pki.dir, "live-ca.pem");
    copyFileSync(pki.otherCaCert, liveCa);
    cp = await startControlPlane({});
    teardown.add("control plane", () => cp.stop());
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    const applied = await cp.admin.apply([
      {
        kind: "upstream",
        name: "secure",
        spec: {
          nodes: [{ address: node.address }],
          tls: { caFile: liveCa },
          // Probed once an hour: the requests meet the certificate, not an eviction.
          healthCheck: { intervalMs: 3_600_000, path: "/healthz" },
        },
      },
      {
        kind: "route",
        name: "secure",
        spec: { match: { pathPrefix: "/secure" }, upstream: "secure", retry: { attempts: 0 } },
      },
    ]);
    // The data plane already runs, on the empty config: wait for the version holding the route.
    const { revision } = applied.body as { revision: number };
    await waitForConvergence(cp, [dp], { atLeast: revision });
  });

  afterAll(() => teardown.run());

  it("follows a renewed CA file without a new snapshot, and refuses a broken one", async () => {
    expect((await send(`${dp.proxyUrl}/secure/before`)).status).toBe(502);

    const reloaded = dp.process.output.count("upstream TLS files reloaded");
    // Written beside and renamed over, as certbot or a Kubernetes secret volume does.
    copyFileSync(pki.caCert, `${liveCa}.new`);
    renameSync(`${liveCa}.new`, liveCa);
    await waitFor(() => reloaded() >= 1, { what: "the reload log line", timeoutMs: 15_000 });
    const after = await send(`${dp.proxyUrl}/secure/after`);
    expect(after.status).toBe(200);
    expect((after.json as NamedUpstreamReply).upstream).toBe("secure");

    const refused = dp.process.output.count("upstream TLS file change refused");
    writeFileSync(liveCa, "not a certificate\n");
    await waitFor(() => refused() >= 1, { what: "the refusal log line", timeoutMs: 15_000 });
    const [line] = dp.process.output.grep("upstream TLS file change refused");
    expect(line).toContain("tls.caFile");
    // The pools built from the good CA serve on; a new connection uses it too.
    for (let i = 0; i < 3; i++) {
      expect((await send(`${dp.proxyUrl}/secure/still-${i}`)).status).toBe(200);
    }
    expect(dp.process.running).toBe(true);
  });
});
