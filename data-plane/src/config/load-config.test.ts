import { type ConfigError, isConfigError, renderHelp } from "@clawgate/runtime";
import { describe, expect, it } from "vitest";
import { DATA_PLANE_SETTINGS } from "./config-schema.js";
import { type LoadConfigOptions, loadConfig } from "./load-config.js";

const files: Record<string, string> = {
  "/etc/dp.yaml": [
    "proxyListen: 0.0.0.0:8081",
    "adminListen: 127.0.0.1:9911",
    "cacheDir: /var/lib/clawgate",
    "logLevel: warn",
  ].join("\n"),
  "/etc/empty.yaml": "",
  "/etc/bad-port.yaml": "adminListen: 127.0.0.1:70000\n",
};

function load(options: LoadConfigOptions = {}) {
  return loadConfig({
    argv: [],
    env: {},
    hostname: "dp-host",
    readFile: (path) => {
      const text = files[path];
      if (text === undefined) throw new Error(`ENOENT: no such file, open '${path}'`);
      return text;
    },
    ...options,
  });
}

function configError(options: LoadConfigOptions): ConfigError {
  try {
    load(options);
  } catch (err) {
    if (isConfigError(err)) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("loadConfig", () => {
  it("uses the documented defaults", () => {
    expect(load()).toEqual({
      proxyListen: "0.0.0.0:8080",
      proxyTlsCertificates: [],
      adminListen: "127.0.0.1:9901",
      cpAddresses: ["127.0.0.1:9190"],
      nodeId: "dp-host-8080",
      cacheDir: "./.clawgate/cache",
      logLevel: "info",
      accessLog: "stdout",
      accessLogSample: 1,
      proxyKeepAliveTimeoutMs: 65_000,
      proxyHeadersTimeoutMs: 60_000,
      proxyRequestTimeoutMs: 300_000,
      proxyMaxConcurrentStreams: 100,
      trustedProxies: [],
      dnsRefreshMs: 5_000,
      dnsServers: [],
      cacheFallbackAfterMs: 5_000,
      watchdogMaxEventLoopDelayMs: 5_000,
      watchdogMaxHeapRatio: 0.9,
      drainTimeoutMs: 10_000,
      drainDelayMs: 0,
      replayBodyLimitBytes: 65_536,
      workers: 1,
      workerApplyTimeoutMs: 30_000,
      workerPingIntervalMs: 1_000,
      workerMaxMissedPings: 10,
      workerHelloTimeoutMs: 30_000,
    });
  });

  it("reads how workers are watched, and names the setting of a value out of range", () => {
    expect(
      load({
        env: { CLAWGATE_WORKER_APPLY_TIMEOUT_MS: "3000", CLAWGATE_WORKER_PING_INTERVAL_MS: "250" },
        argv: ["--worker-max-missed-pings=4", "--worker-hello-timeout-ms=5000"],
      }),
    ).toMatchObject({
      workerApplyTimeoutMs: 3_000,
      workerPingIntervalMs: 250,
      workerMaxMissedPings: 4,
      workerHelloTimeoutMs: 5_000,
    });
    // Zero would kill every worker at the first ping, or every apply at once.
    expect(() => load({ env: { CLAWGATE_WORKER_MAX_MISSED_PINGS: "0" } })).toThrow(
      /workerMaxMissedPings/,
    );
    expect(() => load({ argv: ["--worker-apply-timeout-ms=0"] })).toThrow(/workerApplyTimeoutMs/);
  });

  it("reads workers as a whole number or auto, and names the setting when it is neither", () => {
    expect(load({ env: { CLAWGATE_WORKERS: "4" } })).toMatchObject({ workers: 4 });
    expect(load({ argv: ["--workers=auto"] })).toMatchObject({ workers: "auto" });
    expect(() => load({ env: { CLAWGATE_WORKERS: "0" } })).toThrow(/workers/);
    expect(() => load({ env: { CLAWGATE_WORKERS: "many" } })).toThrow(/workers.*many/s);
  });

  it("reads the drain delay and the replay body limit from env and flags", () => {
    const env = { CLAWGATE_DRAIN_DELAY_MS: "5000", CLAWGATE_REPLAY_BODY_LIMIT_BYTES: "1024" };
    expect(load({ env })).toMatchObject({ drainDelayMs: 5_000, replayBodyLimitBytes: 1_024 });
    const argv = ["--drain-delay-ms=250", "--replay-body-limit-bytes", "0"];
    expect(load({ env, argv })).toMatchObject({ drainDelayMs: 250, replayBodyLimitBytes: 0 });
    expect(() => load({ env: { CLAWGATE_DRAIN_DELAY_MS: "-1" } })).toThrow(/drainDelayMs/);
    expect(() => load({ argv: ["--replay-body-limit-bytes=64k"] })).toThrow(/replayBodyLimitBytes/);
  });

  it("reads the DNS settings, and names dnsServers when an entry is no IP address", () => {
    expect(load()).toMatchObject({ dnsRefreshMs: 5_000, dnsServers: [] });
    const env = {
      CLAWGATE_DNS_SERVERS: "10.0.0.2,127.0.0.1:5353,[::1]:53",
      CLAWGATE_DNS_REFRESH_MS: "0",
    };
    expect(load({ env })).toMatchObject({
      dnsRefreshMs: 0,
      dnsServers: ["10.0.0.2", "127.0.0.1:5353", "[::1]:53"],
    });
    expect(() => load({ env: { CLAWGATE_DNS_SERVERS: "dns.example:53" } })).toThrow(/dnsServers/);
    expect(() => load({ env: { CLAWGATE_DNS_SERVERS: "10.0.0.2:99999" } })).toThrow(/dnsServers/);
    expect(() => load({ env: { CLAWGATE_DNS_REFRESH_MS: "-5" } })).toThrow(/dnsRefreshMs/);
  });

  it("reads the process settings, a fractional heap ratio included", () => {
    expect(
      load({
        env: {
          CLAWGATE_CACHE_FALLBACK_AFTER_MS: "250",
          CLAWGATE_WATCHDOG_MAX_EVENT_LOOP_DELAY_MS: "300",
          CLAWGATE_WATCHDOG_MAX_HEAP_RATIO: "0.75",
          CLAWGATE_DRAIN_TIMEOUT_MS: "2000",
        },
      }),
    ).toMatchObject({
      cacheFallbackAfterMs: 250,
      watchdogMaxEventLoopDelayMs: 300,
      watchdogMaxHeapRatio: 0.75,
      drainTimeoutMs: 2_000,
    });
    expect(() => load({ env: { CLAWGATE_WATCHDOG_MAX_HEAP_RATIO: "1.5" } })).toThrow(
      /watchdogMaxHeapRatio/,
    );
  });

  it("layers file, then env, then flags, each overriding the one before", () => {
    const config = load({
      argv: ["--config", "/etc/dp.yaml", "--admin-listen", "127.0.0.1:0"],
      env: {
        CLAWGATE_PROXY_LISTEN: "127.0.0.1:8082",
        CLAWGATE_DP_ADMIN_LISTEN: "127.0.0.1:9912",
        CLAWGATE_CP_ADDRESSES: "10.0.0.1:9190, 10.0.0.2:9190,",
        CLAWGATE_PROXY_KEEPALIVE_TIMEOUT_MS: "75000",
      },
    });
    expect(config.proxyListen).toBe("127.0.0.1:8082"); // env over file
    expect(config.adminListen).toBe("127.0.0.1:0"); // flag over env over file
    expect(config.cacheDir).toBe("/var/lib/clawgate"); // file over default
    expect(config.logLevel).toBe("warn");
    expect(config.cpAddresses).toEqual(["10.0.0.1:9190", "10.0.0.2:9190"]);
    expect(config.proxyKeepAliveTimeoutMs).toBe(75_000);
    expect(config.nodeId).toBe("dp-host-8082"); // default follows the effective proxy port
  });

  it("reads every setting from its env var and its flag", () => {
    const env = {
      CLAWGATE_PROXY_LISTEN: "[::1]:1",
      CLAWGATE_DP_ADMIN_LISTEN: "localhost:2",
      CLAWGATE_CP_ADDRESSES: "cp:3",
      CLAWGATE_NODE_ID: "env-node",
      CLAWGATE_CACHE_DIR: "/env",
      CLAWGATE_LOG_LEVEL: "debug",
      CLAWGATE_PROXY_KEEPALIVE_TIMEOUT_MS: "5000",
    };
    expect(load({ env })).toMatchObject({
      proxyListen: "[::1]:1",
      adminListen: "localhost:2",
      cpAddresses: ["cp:3"],
      nodeId: "env-node",
      cacheDir: "/env",
      logLevel: "debug",
      proxyKeepAliveTimeoutMs: 5000,
    });
    const argv = [
      "--proxy-listen=127.0.0.1:11",
      "--admin-listen=127.0.0.1:12",
      "--cp-addresses=a:13,b:14",
      "--cp-addresses",
      "c:15",
      "--node-id=flag-node",
      "--cache-dir=/flag",
      "--log-level=error",
      "--proxy-keepalive-timeout-ms=6000",
    ];
    expect(load({ env, argv })).toMatchObject({
      proxyListen: "127.0.0.1:11",
      adminListen: "127.0.0.1:12",
      cpAddresses: ["a:13", "b:14", "c:15"],
      nodeId: "flag-node",
      cacheDir: "/flag",
      logLevel: "error",
      proxyKeepAliveTimeoutMs: 6000,
    });
  });

  it("treats an empty env var and an empty file as unset", () => {
    const config = load({ argv: ["--config", "/etc/empty.yaml"], env: { CLAWGATE_NODE_ID: "" } });
    expect(config.nodeId).toBe("dp-host-8080");
  });

  it("returns a frozen object", () => {
    const config = load();
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.cpAddresses)).toBe(true);
    expect(() => {
      (config as { logLevel: string }).logLevel = "debug";
    }).toThrow(TypeError);
  });

  it("allows port 0 for listeners but not for control plane addresses", () => {
    expect(load({ argv: ["--proxy-listen", "127.0.0.1:0"] }).proxyListen).toBe("127.0.0.1:0");
    const err = configError({ env: { CLAWGATE_CP_ADDRESSES: "127.0.0.1:9190,127.0.0.1:0" } });
    expect(err.problems).toEqual([
      {
        field: "cpAddresses[1]",
        value: "127.0.0.1:0",
        layer: "env CLAWGATE_CP_ADDRESSES",
        reason: "port must be 1-65535",
      },
    ]);
  });
});

describe("loadConfig errors", () => {
  // The layered loader's own errors are tested in @clawgate/runtime; these pin the data
  // plane's names and its one code.
  it("carry CLAWGATE_INVALID_CONFIG and name the field, the value and the variable", () => {
    const err = configError({ env: { CLAWGATE_PROXY_LISTEN: "8080" } });
    expect(err.code).toBe("CLAWGATE_INVALID_CONFIG");
    expect(err.field).toBe("proxyListen");
    expect(err.message).toContain('proxyListen = "8080" (from env CLAWGATE_PROXY_LISTEN)');
  });

  it("names the file a bad value came from", () => {
    const err = configError({ argv: ["--config", "/etc/bad-port.yaml"] });
    expect(err.problems[0]).toMatchObject({
      field: "adminListen",
      value: "127.0.0.1:70000",
      layer: "file /etc/bad-port.yaml",
      reason: "port must be 0-65535",
    });
  });

  it("rejects a non-numeric duration with the text it got", () => {
    const err = configError({ env: { CLAWGATE_PROXY_KEEPALIVE_TIMEOUT_MS: "65s" } });
    expect(err.problems[0]).toMatchObject({
      field: "proxyKeepAliveTimeoutMs",
      value: "65s",
      layer: "env CLAWGATE_PROXY_KEEPALIVE_TIMEOUT_MS",
    });
  });
});

describe("clawgate-data-plane --help", () => {
  it("lists every setting with its flag, variable and default", () => {
    const help = renderHelp({
      program: "clawgate-data-plane",
      summary: "",
      version: "0",
      settings: DATA_PLANE_SETTINGS,
    });
    for (const [name, declaration] of Object.entries(DATA_PLANE_SETTINGS)) {
      expect(help).toContain(`  ${name}\n      --${declaration.flag} `);
      expect(help).toContain(`, ${declaration.variable} (default: `);
    }
    expect(help).toContain("CLAWGATE_PROXY_LISTEN (default: 0.0.0.0:8080)");
    expect(help).toContain("CLAWGATE_DP_ADMIN_LISTEN (default: 127.0.0.1:9901)");
    expect(help).toContain("CLAWGATE_CP_ADDRESSES (default: 127.0.0.1:9190)");
    expect(help).toContain("CLAWGATE_CACHE_DIR (default: ./.clawgate/cache)");
    expect(help).toContain("CLAWGATE_NODE_ID (default: hostname and proxy port)");
  });
});
