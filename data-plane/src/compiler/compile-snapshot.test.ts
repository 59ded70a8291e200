import {
  create,
  DEFAULT_HEALTH_CHECK,
  DEFAULT_ROUTE_TIMEOUTS,
  ROUTE_PATH_RULE,
  type Snapshot,
  SnapshotSchema,
} from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { compileSnapshot } from "./compile-snapshot.js";

type SnapshotInit = Parameters<typeof create<typeof SnapshotSchema>>[1];

function snapshot(init: SnapshotInit = {}): Snapshot {
  return create(SnapshotSchema, {
    version: 42n,
    createdAtMs: 1_700_000_000_000n,
    breakers: [{ name: "default" }],
    upstreams: [
      {
        name: "agents",
        breaker: "default",
        nodes: [
          { address: "127.0.0.1:8081", weight: 3, source: "config" },
          { address: "agents-2.internal:8081", weight: 1, source: "registry" },
        ],
      },
      { name: "canary", nodes: [{ address: "[::1]:9000", weight: 1 }] },
    ],
    routes: [{ name: "api", match: { pathPrefix: "/api" }, upstream: "agents" }],
    ...init,
  });
}

function reasonOf(init: SnapshotInit): string {
  const result = compileSnapshot(snapshot(init));
  if (result.ok) throw new Error("expected a compile error");
  return result.reason;
}

describe("compileSnapshot", () => {
  it("compiles a good snapshot into a frozen object", () => {
    const result = compileSnapshot(snapshot());
    if (!result.ok) throw new Error(result.reason);
    const compiled = result.value;
    expect(compiled.version).toBe(42);
    expect(compiled.createdAtMs).toBe(1_700_000_000_000);
    expect(compiled.routeCount).toBe(1);
    expect([...compiled.nodeAddresses()].sort()).toEqual([
      "127.0.0.1:8081",
      "[::1]:9000",
      "agents-2.internal:8081",
    ]);
    const agents = compiled.upstreams.get("agents")!;
    expect(agents.nodes.map((n) => [n.host, n.port, n.origin])).toEqual([
      ["127.0.0.1", 8081, "http://127.0.0.1:8081"],
      ["agents-2.internal", 8081, "http://agents-2.internal:8081"],
    ]);
    expect(compiled.upstreams.get("canary")!.nodes[0]!.origin).toBe("http://[::1]:9000");

    expect(Object.isFrozen(compiled)).toBe(true);
    expect(Object.isFrozen(agents.nodes[0])).toBe(true);
    expect(Object.isFrozen(compiled.source.routes[0]!.match)).toBe(true);
    const upstreams = compiled.upstreams as Map<string, unknown>;
    expect(() => upstreams.set("x", {})).toThrow(TypeError);
    expect(() => (compiled.nodeAddresses() as Set<string>).add("x")).toThrow(TypeError);
  });

  it("gives routes with the same connect timeout and limits one shared pool settings object", () => {
    const result = compileSnapshot(
      snapshot({
        routes: [
          { name: "a", match: { path: "/a" }, upstream: "agents", timeouts: { connectMs: 250 } },
          { name: "b", match: { path: "/b" }, upstream: "agents", timeouts: { connectMs: 250 } },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const [a, b] = ["/a", "/b"].map((p) => result.value.match("GET", "h", p, {})!);
    expect(a!.targets[0]!.poolSettings).toBe(b!.targets[0]!.poolSettings);
    expect(a!.targets[0]!.poolSettings).toEqual({
      key: "250/0/4000",
      connectTimeoutMs: 250,
      connections: 0,
      keepAliveTimeoutMs: 4000,
      http2: false,
    });
  });

  it("builds pools with each upstream's keepAliveTimeoutMs and names the keys per node", () => {
    const result = compileSnapshot(
      snapshot({
        upstreams: [
          { name: "agents", nodes: [{ address: "10.0.0.1:80", weight: 1 }] },
          {
            name: "slow",
            nodes: [{ address: "10.0.0.2:80", weight: 1 }],
            keepAliveTimeoutMs: 60_000,
          },
        ],
        routes: [
          { name: "a", match: { path: "/a" }, upstream: "agents" },
          { name: "s", match: { path: "/s" }, upstream: "slow", timeouts: { connectMs: 500 } },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    // Unset on the wire (an older control plane): undici's 4 s, as before the field existed.
    expect(result.value.upstreams.get("agents")!.keepAliveTimeoutMs).toBe(4000);
    const slow = result.value.match("GET", "h", "/s", {})!.targets[0]!.poolSettings;
    expect([slow.key, slow.keepAliveTimeoutMs]).toEqual(["500/0/60000", 60_000]);
    expect(
      [...result.value.poolKeys()].map(([address, keys]) => [address, [...keys]]).sort(),
    ).toEqual([
      // Route "a" carries no timeouts: the shared default connect timeout, 1 s.
      ["10.0.0.1:80", ["1000/0/4000"]],
      ["10.0.0.2:80", ["500/0/60000"]],
    ]);
  });

  it("fills what an older control plane left out from the shared defaults, never its own", () => {
    const result = compileSnapshot(
      snapshot({
        upstreams: [{ name: "bare", nodes: [{ address: "10.0.0.9:80", weight: 1 }] }],
        routes: [{ name: "bare", match: { path: "/bare" }, upstream: "bare" }],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const route = result.value.match("GET", "h", "/bare", {})!;
    expect({
      connectMs: route.connectTimeoutMs,
      headersMs: route.headersTimeoutMs,
      bodyMs: route.bodyTimeoutMs,
      totalMs: route.totalTimeoutMs,
      streamIdleMs: route.streamIdleMs,
    }).toEqual(DEFAULT_ROUTE_TIMEOUTS);
    // One probe path default for both planes: the control plane's documents say /healthz.
    const upstream = result.value.upstreams.get("bare")!;
    expect(upstream.source.healthCheck?.path).toBe(DEFAULT_HEALTH_CHECK.path);
    expect(DEFAULT_HEALTH_CHECK.path).toBe("/healthz");
  });

  it("normalizes route paths so they match the normalized request paths", () => {
    const result = compileSnapshot(
      snapshot({
        routes: [
          { name: "v1", match: { pathPrefix: "/api//v1/./" }, upstream: "agents" },
          { name: "home", match: { path: "/%7euser" }, upstream: "agents" },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    expect(result.value.match("GET", "h", "/api/v1/x", {})?.name).toBe("v1");
    expect(result.value.match("GET", "h", "/~user", {})?.name).toBe("home");
  });

  it("gives a route without a retry policy 2 attempts on connect failures and resets", () => {
    const result = compileSnapshot(
      snapshot({
        routes: [
          { name: "plain", match: { path: "/plain" }, upstream: "agents" },
          { name: "own", match: { path: "/own" }, upstream: "agents", retry: { attempts: 1 } },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const plain = result.value.match("GET", "h", "/plain", {})!;
    expect([plain.retryAttempts, plain.retryOn]).toEqual([2, ["connect-failure", "reset"]]);
    // A policy on the wire is taken as written: the control plane filled its defaults in.
    const own = result.value.match("GET", "h", "/own", {})!;
    expect([own.retryAttempts, own.retryOn]).toEqual([1, []]);
  });

  it("picks split targets by smooth WRR over split weights", () => {
    const result = compileSnapshot(
      snapshot({
        routes: [
          {
            name: "split",
            match: { pathPrefix: "/" },
            split: [
              { upstream: "agents", weight: 3 },
              { upstream: "canary", weight: 1 },
            ],
          },
        ],
      }),
    );
    if (!result.ok) throw new Error(result.reason);
    const route = result.value.match("GET", "h", "/", {})!;
    const picks = Array.from({ length: 8 }, () => route.pickTarget()!.upstream.name);
    expect(picks.join(",")).toBe("agents,agents,canary,agents,agents,agents,canary,agents");
  });

  it.each<[string, SnapshotInit, string]>([
    [
      "unknown upstream",
      { routes: [{ name: "r", match: { path: "/" }, upstream: "nope" }] },
      'route "r": upstream names upstream nope, which does not exist',
    ],
    [
      "unknown split upstream",
      { routes: [{ name: "r", match: { path: "/" }, split: [{ upstream: "nope", weight: 1 }] }] },
      'route "r": split.0.upstream names upstream nope, which does not exist',
    ],
    [
      "split weight 0",
      { routes: [{ name: "r", match: { path: "/" }, split: [{ upstream: "agents" }] }] },
      'route "r": split.0.weight must be 1..1000000, got 0',
    ],
    [
      "empty route name",
      { routes: [{ match: { path: "/" }, upstream: "agents" }] },
      "routes: name is empty (routes[0])",
    ],
    [
      "duplicate route name",
      {
        routes: [
          { name: "r", match: { path: "/a" }, upstream: "agents" },
          { name: "r", match: { path: "/b" }, upstream: "agents" },
        ],
      },
      'route "r": name is repeated',
    ],
    [
      "missing match",
      { routes: [{ name: "r", upstream: "agents" }] },
      'route "r": match is missing',
    ],
    [
      "neither path nor prefix",
      { routes: [{ name: "r", match: {}, upstream: "agents" }] },
      'route "r": match sets neither path nor pathPrefix; set one',
    ],
    [
      "both path and prefix",
      { routes: [{ name: "r", match: { path: "/a", pathPrefix: "/a" }, upstream: "agents" }] },
      'route "r": match sets both path and pathPrefix; set one',
    ],
    [
      "relative path",
      { routes: [{ name: "r", match: { pathPrefix: "api" }, upstream: "agents" }] },
      `route "r": match.pathPrefix ${ROUTE_PATH_RULE}`,
    ],
    [
      "route path a request could never reach",
      { routes: [{ name: "r", match: { pathPrefix: "/a%2Fb" }, upstream: "agents" }] },
      `route "r": match.pathPrefix ${ROUTE_PATH_RULE}`,
    ],
    [
      "both upstream and split",
      {
        routes: [
          {
            name: "r",
            match: { path: "/" },
            upstream: "agents",
            split: [{ upstream: "agents", weight: 1 }],
          },
        ],
      },
      'route "r": sets both upstream and split; set one',
    ],
    [
      "no target",
      { routes: [{ name: "r", match: { path: "/" } }] },
      'route "r": sets neither upstream nor split; set one',
    ],
    [
      "host with port",
      { routes: [{ name: "r", match: { path: "/", hosts: ["a.com:80"] }, upstream: "agents" }] },
      'route "r": match.hosts.0 must be a host name (or *.suffix) without port',
    ],
    [
      "lower-case method",
      { routes: [{ name: "r", match: { path: "/", methods: ["get"] }, upstream: "agents" }] },
      'route "r": match.methods.0 must be upper case',
    ],
    [
      "bad rewrite prefix",
      {
        routes: [
          { name: "r", match: { path: "/" }, upstream: "agents", rewrite: { pathPrefix: "v2" } },
        ],
      },
      'route "r": rewrite.pathPrefix must start with "/"',
    ],
    [
      "keep-alive time of zero",
      { upstreams: [{ name: "u", keepAliveTimeoutMs: 0 }], routes: [] },
      'upstream "u": keepAliveTimeoutMs must be 1..600000, got 0',
    ],
    [
      "keep-alive time over ten minutes",
      { upstreams: [{ name: "u", keepAliveTimeoutMs: 600_001 }], routes: [] },
      'upstream "u": keepAliveTimeoutMs must be 1..600000, got 600001',
    ],
    [
      "rewrite prefix with CR/LF",
      {
        routes: [
          {
            name: "r",
            match: { path: "/" },
            upstream: "agents",
            rewrite: { pathPrefix: "/v2\r\nX-Injected: 1" },
          },
        ],
      },
      'route "r": rewrite.pathPrefix has a control character (U+000D) at 3; percent-encode it',
    ],
    [
      "rewrite prefix with a query",
      {
        routes: [
          { name: "r", match: { path: "/" }, upstream: "agents", rewrite: { pathPrefix: "/v2?a" } },
        ],
      },
      'route "r": rewrite.pathPrefix has a "?" at 3; a query is not allowed here',
    ],
    [
      "health check path with a space",
      { upstreams: [{ name: "u", healthCheck: { path: "/health z" } }], routes: [] },
      'upstream "u": healthCheck.path has a space at 7; percent-encode it',
    ],
    [
      "health check path with CR/LF",
      { upstreams: [{ name: "u", healthCheck: { path: "/h\r\nHost: evil" } }], routes: [] },
      'upstream "u": healthCheck.path has a control character (U+000D) at 2; percent-encode it',
    ],
    [
      "relative health check path",
      { upstreams: [{ name: "u", healthCheck: { path: "healthz" } }], routes: [] },
      'upstream "u": healthCheck.path must start with "/"',
    ],
    [
      "expected status with a line break",
      { upstreams: [{ name: "u", healthCheck: { path: "/h", expectStatus: "ok\n" } }], routes: [] },
      'upstream "u": healthCheck.expectStatus holds a control character',
    ],
    [
      "node address without port",
      { upstreams: [{ name: "u", nodes: [{ address: "10.0.0.1", weight: 1 }] }], routes: [] },
      'upstream "u": nodes.0.address is not host:port',
    ],
    [
      "node port out of range",
      { upstreams: [{ name: "u", nodes: [{ address: "h:70000", weight: 1 }] }], routes: [] },
      'upstream "u": nodes.0.address has a port outside 1..65535',
    ],
    [
      "node weight 0",
      { upstreams: [{ name: "u", nodes: [{ address: "h:80" }] }], routes: [] },
      'upstream "u": nodes.0.weight must be 1..1000, got 0',
    ],
    [
      "duplicate node",
      {
        upstreams: [
          {
            name: "u",
            nodes: [
              { address: "h:80", weight: 1 },
              { address: "h:80", weight: 2 },
            ],
          },
        ],
        routes: [],
      },
      'upstream "u": nodes.1.address repeats "h:80"',
    ],
    [
      "duplicate upstream",
      { upstreams: [{ name: "u" }, { name: "u" }], routes: [] },
      'upstream "u": name is repeated',
    ],
    [
      "unknown breaker",
      { upstreams: [{ name: "u", breaker: "strict" }], routes: [] },
      'upstream "u": breaker names breaker strict, which does not exist',
    ],
  ])("refuses %s with a reason", (_, init, reason) => {
    expect(reasonOf(init)).toBe(reason);
  });

  it("returns the shared validation's structured problems with the reason", () => {
    const result = compileSnapshot(
      snapshot({
        upstreams: [{ name: "u", nodes: [{ address: "10.0.0.1", weight: 1 }] }],
        routes: [{ name: "r", match: { path: "/" }, upstream: "nope" }],
      }),
    );
    if (result.ok) throw new Error("compiled a snapshot with two problems");
    expect(result.problems).toEqual([
      { kind: "upstreams", name: "u", field: "nodes.0.address", message: "is not host:port" },
      {
        kind: "routes",
        name: "r",
        field: "upstream",
        message: "names upstream nope, which does not exist",
      },
    ]);
    expect(result.reason).toBe(
      'upstream "u": nodes.0.address is not host:port; route "r": upstream names upstream nope, which does not exist',
    );
  });

  it("accepts an origin-form health check path with a query, and no path (TCP only)", () => {
    for (const path of ["/status?deep=1", ""]) {
      const result = compileSnapshot(
        snapshot({ upstreams: [{ name: "u", healthCheck: { path } }], routes: [] }),
      );
      expect(result.ok, path).toBe(true);
    }
  });
});
