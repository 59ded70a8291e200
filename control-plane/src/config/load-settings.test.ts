import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isConfigError, renderHelp } from "@clawgate/runtime";
import { describe, expect, it } from "vitest";
import { loadControlPlaneSettings } from "./load-settings.js";
import { CONTROL_PLANE_SETTINGS } from "./settings.js";

function yamlFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "cp-settings-")), "cp.yaml");
  writeFileSync(path, text);
  return path;
}

describe("loadControlPlaneSettings", () => {
  it("uses the documented defaults", () => {
    const settings = loadControlPlaneSettings([], {});
    expect(settings).toMatchObject({
      adminListen: "127.0.0.1:9180",
      grpcListen: "127.0.0.1:9190",
      etcdEndpoints: [],
      etcdPrefix: "/clawgate/",
      storePath: "./.clawgate/store.json",
      adminTokenFile: "./.clawgate/admin-token",
      staleGraceMs: 10_000,
      logLevel: "info",
      watchdogMaxEventLoopDelayMs: 5_000,
      watchdogMaxHeapRatio: 0.9,
      drainTimeoutMs: 10_000,
      leaderTtlSeconds: 10,
      applyLeaseTtlSeconds: 5,
      grpcMaxStreams: 1024,
    });
    expect(settings.adminToken).toBeUndefined();
    expect(settings.grpcTlsCertFile).toBeUndefined();
    expect(settings.instanceId).toMatch(new RegExp(`-${process.pid}$`));
    expect(Object.isFrozen(settings)).toBe(true);
  });

  it("reads grpcMaxStreams from CLAWGATE_GRPC_MAX_STREAMS and refuses 0", () => {
    expect(loadControlPlaneSettings([], { CLAWGATE_GRPC_MAX_STREAMS: "64" }).grpcMaxStreams).toBe(
      64,
    );
    expect(() => loadControlPlaneSettings([], { CLAWGATE_GRPC_MAX_STREAMS: "0" })).toThrow(
      /grpcMaxStreams = 0 \(from env CLAWGATE_GRPC_MAX_STREAMS\)/,
    );
  });

  it("refuses an instanceId longer than a snapshot nonce may carry", () => {
    expect(() => loadControlPlaneSettings([], { CLAWGATE_INSTANCE_ID: "i".repeat(201) })).toThrow(
      /instanceId = .*<=200 characters/,
    );
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

  it("reads every setting from its variable and its flag", () => {
    const values: Record<string, string> = {
      adminListen: "127.0.0.1:1",
      grpcListen: "[::1]:2",
      etcdEndpoints: "http://e:2379",
      etcdPrefix: "/x/",
      storePath: "/s.json",
      adminToken: "0123456789abcdef",
      adminTokenFile: "/t",
      staleGraceMs: "5",
      instanceId: "cp-1",
      logLevel: "warn",
      watchdogMaxEventLoopDelayMs: "100",
      watchdogMaxHeapRatio: "0.5",
      drainTimeoutMs: "6",
      leaderTtlSeconds: "7",
      applyLeaseTtlSeconds: "4",
      grpcTlsCertFile: "/c",
      grpcTlsKeyFile: "/k",
      grpcTlsClientCaFile: "/ca",
      grpcMaxStreams: "8",
      adminTlsCertFile: "/ac",
      adminTlsKeyFile: "/ak",
      historyLimit: "9",
      historyMaxBytes: "2000000",
      quotaMinuteMs: "2000",
      quotaDayMs: "3000",
      remediationCommands: "/usr/bin/systemctl,/opt/heal",
      remediationWebhookOrigins: "https://hooks.example",
      remediationAllowRoot: "true",
      remediationMaxConcurrent: "12",
    };
    expect(Object.keys(values).sort()).toEqual(Object.keys(CONTROL_PLANE_SETTINGS).sort());
    const expected = {
      ...values,
      etcdEndpoints: ["http://e:2379"],
      staleGraceMs: 5,
      watchdogMaxEventLoopDelayMs: 100,
      watchdogMaxHeapRatio: 0.5,
      drainTimeoutMs: 6,
      leaderTtlSeconds: 7,
      applyLeaseTtlSeconds: 4,
      grpcMaxStreams: 8,
      historyLimit: 9,
      historyMaxBytes: 2_000_000,
      quotaMinuteMs: 2000,
      quotaDayMs: 3000,
      remediationCommands: ["/usr/bin/systemctl", "/opt/heal"],
      remediationWebhookOrigins: ["https://hooks.example"],
      remediationAllowRoot: true,
      remediationMaxConcurrent: 12,
    };
    const env = Object.fromEntries(
      Object.entries(values).map(([name, value]) => [
        CONTROL_PLANE_SETTINGS[name as keyof typeof CONTROL_PLANE_SETTINGS].variable,
        value,
      ]),
    );
    expect(loadControlPlaneSettings([], env)).toEqual(expected);
    const argv = Object.entries(values).flatMap(([name, value]) => [
      `--${CONTROL_PLANE_SETTINGS[name as keyof typeof CONTROL_PLANE_SETTINGS].flag}`,
      value,
    ]);
    expect(loadControlPlaneSettings(argv, {})).toEqual(expected);
  });

  it.each([
    [[], { CLAWGATE_ADMIN_LISTEN: "nowhere" }, "adminListen", "env CLAWGATE_ADMIN_LISTEN"],
    [["--stale-grace-ms=-5"], {}, "staleGraceMs", "flag --stale-grace-ms"],
    [[], { CLAWGATE_HISTORY_LIMIT: "0" }, "historyLimit", "env CLAWGATE_HISTORY_LIMIT"],
    [[], { CLAWGATE_ETCD_PREFIX: "clawgate" }, "etcdPrefix", "env CLAWGATE_ETCD_PREFIX"],
    [
      [],
      { CLAWGATE_ETCD_ENDPOINTS: "not a url" },
      "etcdEndpoints[0]",
      "env CLAWGATE_ETCD_ENDPOINTS",
    ],
    [["--no-such-flag", "1"], {}, "--no-such-flag", "flag --no-such-flag"],
  ])("names the bad field and its layer (%j %j)", (argv, env, field, layer) => {
    let error: unknown;
    try {
      loadControlPlaneSettings(argv, env);
    } catch (caught) {
      error = caught;
    }
    if (!isConfigError(error)) throw new Error("expected a ConfigError");
    expect(error.code).toBe("CLAWGATE_INVALID_CONFIG");
    expect(error.problems[0]).toMatchObject({ field, layer });
  });

  it("reads decimal numbers from text, and takes only real numbers from YAML", () => {
    expect(
      loadControlPlaneSettings([], { CLAWGATE_WATCHDOG_MAX_HEAP_RATIO: "0.75" })
        .watchdogMaxHeapRatio,
    ).toBe(0.75);
    expect(() =>
      loadControlPlaneSettings(["--config", yamlFile("watchdogMaxHeapRatio: true\n")], {}),
    ).toThrow(/watchdogMaxHeapRatio = true \(from file /);
  });

  it("never prints the admin token it refuses", () => {
    expect(() => loadControlPlaneSettings([], { CLAWGATE_ADMIN_TOKEN: "short-secret" })).toThrow(
      /^CLAWGATE_INVALID_CONFIG: adminToken \(from env CLAWGATE_ADMIN_TOKEN\): must be at least 16 characters$/,
    );
  });
});

describe("clawgate-control-plane --help", () => {
  it("lists every setting with its flag, variable and default", () => {
    const help = renderHelp({
      program: "clawgate-control-plane",
      summary: "",
      version: "0",
      settings: CONTROL_PLANE_SETTINGS,
    });
    for (const [name, declaration] of Object.entries(CONTROL_PLANE_SETTINGS)) {
      expect(help).toContain(`  ${name}\n      --${declaration.flag} `);
      expect(help).toContain(`, ${declaration.variable} (default: `);
    }
    expect(help).toContain("CLAWGATE_ADMIN_LISTEN (default: 127.0.0.1:9180)");
    expect(help).toContain("CLAWGATE_GRPC_LISTEN (default: 127.0.0.1:9190)");
    expect(help).toContain("CLAWGATE_ETCD_ENDPOINTS (default: none: the embedded store)");
    expect(help).toContain("CLAWGATE_INSTANCE_ID (default: hostname and PID)");
  });
});
