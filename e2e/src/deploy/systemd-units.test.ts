import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/paths.js";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import { parseUnitFile, type UnitFile, unitValue } from "./unit-file.js";

const run = promisify(execFile);
const SYSTEMD_DIR = join(REPO_ROOT, "deploy/systemd");
const SYSTEMD_ANALYZE = "/usr/bin/systemd-analyze";
const UNITS = ["clawgate-control-plane.service", "clawgate-data-plane.service"] as const;

/** The processes' drain timeout after SIGTERM; TimeoutStopSec must leave room above it. */
const DRAIN_TIMEOUT_SECONDS = 10;

/** Keys both units must carry, with the value seed 000 and DESIGN.md fix. */
const REQUIRED: readonly [section: string, key: string, value: string][] = [
  ["Unit", "StartLimitIntervalSec", "0"],
  ["Service", "Type", "notify"],
  ["Service", "NotifyAccess", "main"],
  ["Service", "Restart", "always"],
  ["Service", "RestartSec", "3"],
  ["Service", "WatchdogSec", "20"],
  ["Service", "KillMode", "mixed"],
  ["Service", "TimeoutStopSec", "15"],
  ["Service", "NoNewPrivileges", "yes"],
  ["Service", "ProtectSystem", "strict"],
  ["Service", "ProtectHome", "yes"],
  ["Service", "PrivateTmp", "yes"],
  ["Service", "PrivateDevices", "yes"],
  ["Service", "ProtectKernelTunables", "yes"],
  ["Service", "ProtectKernelModules", "yes"],
  ["Service", "ProtectControlGroups", "yes"],
  ["Service", "RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"],
  ["Service", "LockPersonality", "yes"],
  ["Service", "RestrictRealtime", "yes"],
  ["Service", "RestrictSUIDSGID", "yes"],
  ["Service", "CapabilityBoundingSet", ""],
];

/**
 * `systemd-analyze verify` exits 0 on unknown keys and bad values, so its output is the result.
 * It checks that ExecStart's executable exists, not its arguments: the copy under test points
 * at the node running this test (where node lives differs between machines), while the script
 * argument under /opt/clawgate stays as shipped because verify never opens it.
 */
async function verify(dir: string, name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(
    path,
    text.replace(/^ExecStart=\/usr\/bin\/node /m, `ExecStart=${process.execPath} `),
  );
  const { stdout, stderr } = await run(SYSTEMD_ANALYZE, ["verify", "--man=no", path]).catch(
    (err: { stdout: string; stderr: string }) => err,
  );
  return `${stdout}${stderr}`.trim();
}

const units = new Map<string, { text: string; unit: UnitFile }>();
let workDir: string;

beforeAll(async () => {
  workDir = await makeWorkDir("systemd");
  for (const name of UNITS) {
    const text = await readFile(join(SYSTEMD_DIR, name), "utf8");
    units.set(name, { text, unit: parseUnitFile(text) });
  }
});

afterAll(() => removeWorkDir(workDir));

describe.each(UNITS)("%s", (name) => {
  const get = () => units.get(name)!;

  it.skipIf(!existsSync(SYSTEMD_ANALYZE))(
    "passes systemd-analyze verify without a word",
    async () => {
      expect(await verify(workDir, name, get().text)).toBe("");
    },
  );

  it.skipIf(!existsSync(SYSTEMD_ANALYZE))(
    "would be caught by verify if a key were misspelt or node were missing",
    async () => {
      // Proves the empty output above is a pass, not a verify that looked at nothing.
      const misspelt = get().text.replace("WatchdogSec=20", "WatchdogSecs=20");
      expect(await verify(workDir, name, misspelt)).toMatch(/Unknown key 'WatchdogSecs'/);
      const output = await verify(
        workDir,
        name,
        get().text.replace("ExecStart=/usr/bin/node ", "ExecStart=/nonexistent/node "),
      );
      expect(output).toMatch(/\/nonexistent\/node is not executable/);
    },
  );

  it.each(REQUIRED)("[%s] %s=%s", (section, key, value) => {
    expect(unitValue(get().unit, section, key)).toBe(value);
  });

  it("starts the installed script with /usr/bin/node from its env file under /etc/clawgate", () => {
    const { unit } = get();
    const base = name.replace(/\.service$/, "");
    expect(unitValue(unit, "Service", "ExecStart")).toBe(
      `/usr/bin/node /opt/clawgate/${base.replace("clawgate-", "")}/dist/bin/${base}.js`,
    );
    expect(unitValue(unit, "Service", "EnvironmentFile")).toBe(`/etc/clawgate/${base}.env`);
    expect(existsSync(join(SYSTEMD_DIR, `${base}.env`))).toBe(true);
    expect(unitValue(unit, "Install", "WantedBy")).toBe("multi-user.target");
  });

  it("gives the env file's drain time room to finish before SIGKILL", async () => {
    const envFile = await readFile(join(SYSTEMD_DIR, name.replace(/\.service$/, ".env")), "utf8");
    const drainMs = Number(/^CLAWGATE_DRAIN_TIMEOUT_MS=(\d+)$/m.exec(envFile)?.[1]);
    expect(drainMs).toBe(DRAIN_TIMEOUT_SECONDS * 1000);
    const stopSec = Number(unitValue(get().unit, "Service", "TimeoutStopSec"));
    expect(stopSec * 1000).toBeGreaterThan(drainMs);
  });

  it("runs as an unprivileged user with a state directory", () => {
    const { unit } = get();
    const dynamic = unitValue(unit, "Service", "DynamicUser") === "yes";
    if (!dynamic) {
      expect(unitValue(unit, "Service", "User")).toBe("clawgate");
      expect(unitValue(unit, "Service", "Group")).toBe("clawgate");
    }
    expect(unitValue(unit, "Service", "StateDirectory")).toBe(name.replace(/\.service$/, ""));
    expect(Number(unitValue(unit, "Service", "LimitNOFILE"))).toBeGreaterThanOrEqual(65_536);
  });

  it("says why beside every setting", () => {
    // Every Key= line in [Service] and [Unit] has a comment within the three lines above it.
    const lines = get().text.split("\n");
    const bare = lines.filter((line, index) => {
      if (!/^[A-Z][A-Za-z]+=/.test(line) || /^(Description)=/.test(line)) return false;
      const above = lines.slice(Math.max(0, index - 3), index);
      return !above.some((prior) => prior.startsWith("#"));
    });
    expect(bare).toEqual([]);
  });
});

describe("clawgate-data-plane.service", () => {
  it("keeps the snapshot cache in its StateDirectory, the one place it may write", () => {
    const unit = units.get("clawgate-data-plane.service")!.unit;
    const env = unit.get("Service")?.get("Environment") ?? [];
    expect(env).toContain("CLAWGATE_CACHE_DIR=%S/clawgate-data-plane");
    expect(unitValue(unit, "Service", "StateDirectory")).toBe("clawgate-data-plane");
    expect(unitValue(unit, "Service", "ProtectSystem")).toBe("strict");
  });
});

describe("environment files", () => {
  it.each([
    [
      "clawgate-control-plane.env",
      ["CLAWGATE_ADMIN_LISTEN", "CLAWGATE_GRPC_LISTEN", "CLAWGATE_ETCD_ENDPOINTS"],
    ],
    [
      "clawgate-data-plane.env",
      ["CLAWGATE_PROXY_LISTEN", "CLAWGATE_DP_ADMIN_LISTEN", "CLAWGATE_CP_ADDRESSES"],
    ],
  ])("%s sets only CLAWGATE_* variables, including %j", async (file, expected) => {
    const text = await readFile(join(SYSTEMD_DIR, file), "utf8");
    const set = text
      .split("\n")
      .filter((line) => line.trim() !== "" && !line.startsWith("#"))
      .map((line) => line.split("=")[0]);
    for (const name of set) expect(name).toMatch(/^CLAWGATE_[A-Z_]+$/);
    expect(set).toEqual(expect.arrayContaining(expected));
  });
});
