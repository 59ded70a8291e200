import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadControlPlaneSettings } from "./load-settings.js";

function yamlFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "cp-settings-")), "cp.yaml");
  writeFileSync(path, text);
  return path;
}

describe("loadControlPlaneSettings", () => {
  it("uses the documented defaults", () => {
    const settings = loadControlPlaneSettings([], {});
    expect(settings.adminListen).toBe("127.0.0.1:9180");
    expect(settings.grpcListen).toBe("127.0.0.1:9190");
    expect(settings.etcdEndpoints).toEqual([]);
    expect(settings.etcdPrefix).toBe("/clawgate/");
    expect(Object.isFrozen(settings)).toBe(true);
  });

  it("layers file, then environment, then flags", () => {
    const file = yamlFile(
      "adminListen: 127.0.0.1:1000\ngrpcListen: 127.0.0.1:2000\nlogLevel: warn\n",
    );
    const settings = loadControlPlaneSettings(
      ["--config", file, "--grpc-listen", "127.0.0.1:3000"],
      {
        CLAWGATE_GRPC_LISTEN: "127.0.0.1:2500",
        CLAWGATE_LOG_LEVEL: "debug",
        CLAWGATE_ETCD_ENDPOINTS: "http://127.0.0.1:2379, http://127.0.0.1:2380",
      },
    );
    expect(settings.adminListen).toBe("127.0.0.1:1000");
    expect(settings.logLevel).toBe("debug");
    expect(settings.grpcListen).toBe("127.0.0.1:3000");
    expect(settings.etcdEndpoints).toEqual(["http://127.0.0.1:2379", "http://127.0.0.1:2380"]);
  });

  it.each([
    [
      [],
      { CLAWGATE_ADMIN_LISTEN: "nowhere" },
      /adminListen: must be host:port \(got "nowhere" from environment\)/,
    ],
    [["--stale-grace-ms=-5"], {}, /staleGraceMs: .*from flags/],
    [[], { CLAWGATE_ETCD_PREFIX: "clawgate" }, /etcdPrefix: must start and end with '\/'/],
    [["--no-such-flag", "1"], {}, /no-such-flag/],
  ])("names the bad field, its value and its layer (%j %j)", (argv, env, message) => {
    expect(() => loadControlPlaneSettings(argv, env)).toThrow(ConfigError);
    expect(() => loadControlPlaneSettings(argv, env)).toThrow(message);
  });

  it("reads decimal numbers from text, and takes only real numbers from YAML", () => {
    expect(
      loadControlPlaneSettings([], { CLAWGATE_WATCHDOG_MAX_HEAP_RATIO: "0.75" })
        .watchdogMaxHeapRatio,
    ).toBe(0.75);
    expect(() =>
      loadControlPlaneSettings(["--config", yamlFile("watchdogMaxHeapRatio: true\n")], {}),
    ).toThrow(/watchdogMaxHeapRatio: .*got true/);
  });

  it("refuses a __proto__ key in the file instead of applying the settings under it", () => {
    const file = yamlFile("__proto__:\n  logLevel: debug\n");
    expect(() => loadControlPlaneSettings(["--config", file], {})).toThrow(
      /Unrecognized key: "__proto__"/,
    );
  });

  it("reports a config file that cannot be read", () => {
    expect(() => loadControlPlaneSettings(["--config", "/nonexistent/cp.yaml"], {})).toThrow(
      /cannot read config file \/nonexistent\/cp.yaml/,
    );
  });
});
