import { afterEach, describe, expect, it } from "vitest";
import { CONTROL_PLANE_BIN, DATA_PLANE_BIN, runToExit, Teardown } from "./support/index.js";

const teardown = new Teardown();
afterEach(() => teardown.run());

/** The one CLAWGATE_INVALID_CONFIG line a binary printed before it exited. */
function configLines(output: string): string[] {
  return output.split("\n").filter((line) => line.includes("CLAWGATE_INVALID_CONFIG"));
}

describe("settings errors on the built binaries", () => {
  it.each([
    [CONTROL_PLANE_BIN, { CLAWGATE_STALE_GRACE_MS: "soon" }, 'staleGraceMs = "soon"'],
    [DATA_PLANE_BIN, { CLAWGATE_PROXY_LISTEN: "8080" }, 'proxyListen = "8080"'],
  ])(
    "%s names a bad flag and a bad env value in one message and exits 2",
    async (bin, env, badEnv) => {
      const variable = Object.keys(env)[0];
      const result = await runToExit(teardown, bin, ["--bogus=1"], env);
      expect(result.code).toBe(2);
      const lines = configLines(result.output);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain('--bogus = "1" (from flag --bogus): unknown flag');
      expect(lines[0]).toContain(`${badEnv} (from env ${variable})`);
    },
  );

  it("the control plane names the layer of an admin TLS file it cannot read", async () => {
    const path = "/nonexistent-clawgate-dir/tls.crt";
    const result = await runToExit(teardown, CONTROL_PLANE_BIN, ["--admin-tls-cert-file", path], {
      CLAWGATE_ADMIN_TLS_KEY_FILE: "/nonexistent-clawgate-dir/tls.key",
    });
    expect(result.code).toBe(2);
    expect(configLines(result.output)).toEqual([
      expect.stringContaining(
        `adminTlsCertFile = "${path}" (from flag --admin-tls-cert-file): cannot read it`,
      ),
    ]);
  });

  it("the data plane names the layer of an access log it cannot open", async () => {
    const path = "/nonexistent-clawgate-dir/access.log";
    const result = await runToExit(teardown, DATA_PLANE_BIN, ["--access-log", path]);
    expect(result.code).toBe(2);
    expect(configLines(result.output)).toEqual([
      expect.stringContaining(`accessLog = "${path}" (from flag --access-log): cannot open`),
    ]);
  });
});
