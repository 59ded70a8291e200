import { readFile } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import {
  CLAWCTL_BIN,
  CONTROL_PLANE_BIN,
  DATA_PLANE_BIN,
  REPO_ROOT,
  runToExit,
  Teardown,
} from "./support/index.js";

const teardown = new Teardown();
afterEach(() => teardown.run());

async function versionOf(workspace: string): Promise<string> {
  const text = await readFile(`${REPO_ROOT}${workspace}/package.json`, "utf8");
  return JSON.parse(text).version;
}

function run(bin: string, args: string[], env: Record<string, string> = {}) {
  return runToExit(teardown, bin, args, env);
}

describe("--help and --version on the built binaries", () => {
  it.each([
    [CONTROL_PLANE_BIN, "clawgate-control-plane", ["CLAWGATE_ADMIN_LISTEN", "--grpc-listen"]],
    [DATA_PLANE_BIN, "clawgate-data-plane", ["CLAWGATE_PROXY_LISTEN", "--cp-addresses"]],
  ])("%s --help lists the settings, exits 0 and starts nothing", async (bin, name, expected) => {
    const result = await run(bin, ["--help"]);
    expect(result.code).toBe(0);
    expect(result.output).toContain(`Usage: ${name}`);
    for (const text of expected) expect(result.output).toContain(text);
    // The control plane writes its store and token under ./.clawgate as soon as it starts.
    expect(result.files).toEqual([]);
  });

  it.each([
    [CONTROL_PLANE_BIN, "clawgate-control-plane", "control-plane"],
    [DATA_PLANE_BIN, "clawgate-data-plane", "data-plane"],
  ])("%s --version prints the package version and exits 0", async (bin, name, workspace) => {
    const result = await run(bin, ["--version"]);
    expect(result.code).toBe(0);
    expect(result.output.trim()).toBe(`${name} ${await versionOf(workspace)}`);
  });

  it("clawctl --version and a command's --help exit 0", async () => {
    const version = await run(CLAWCTL_BIN, ["--version"]);
    expect(version.code).toBe(0);
    expect(version.output.trim()).toBe(await versionOf("control-plane"));
    const help = await run(CLAWCTL_BIN, ["apply", "--help"]);
    expect(help.code).toBe(0);
    expect(help.output).toContain("Usage: clawctl apply");
  });

  it.each([
    [
      CONTROL_PLANE_BIN,
      { CLAWGATE_STALE_GRACE_MS: "soon" },
      'staleGraceMs = "soon" (from env CLAWGATE_STALE_GRACE_MS)',
    ],
    [
      DATA_PLANE_BIN,
      { CLAWGATE_CP_ADDRESSES: "127.0.0.1:0" },
      'cpAddresses[0] = "127.0.0.1:0" (from env CLAWGATE_CP_ADDRESSES): port must be 1-65535',
    ],
  ])(
    "%s exits 2 on a bad setting, naming it under CLAWGATE_INVALID_CONFIG",
    async (bin, env, message) => {
      const result = await run(bin, [], env);
      expect(result.code).toBe(2);
      expect(result.output).toContain(`CLAWGATE_INVALID_CONFIG: ${message}`);
      expect(result.files).toEqual([]);
    },
  );
});
