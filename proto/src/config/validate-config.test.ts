import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { SnapshotSchema } from "../gen/clawgate/v1/config_pb.js";
import {
  DEFAULT_BREAKER_POLICY,
  DEFAULT_HEALTH_CHECK,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_RETRY_ATTEMPTS,
  DEFAULT_RETRY_ON,
  DEFAULT_ROUTE_TIMEOUTS,
} from "./defaults.js";
import { formatProblem } from "./problems.js";
import { referenceProblems } from "./references.js";
import { validateResource, validateSnapshot } from "./validate-config.js";

describe("validateResource", () => {
  it("fills every default of an upstream from the shared defaults", () => {
    const result = validateResource("upstreams", "agents", { nodes: [{ address: "a:80" }] });
    expect(result).toEqual({
      ok: true,
      document: {
        nodes: [{ address: "a:80", weight: 1 }],
        healthCheck: { ...DEFAULT_HEALTH_CHECK },
        breaker: "default",
        maxConnectionsPerNode: 128,
        keepAliveTimeoutMs: DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
        hostRewrite: false,
        retryAfterScope: "node",
        http2: false,
      },
    });
  });

  it("fills a route's retry, timeouts and fallback from the shared defaults", () => {
    const result = validateResource("routes", "api", {
      match: { pathPrefix: "/api" },
      upstream: "agents",
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.document.retry).toEqual({
      attempts: DEFAULT_RETRY_ATTEMPTS,
      on: [...DEFAULT_RETRY_ON],
    });
    expect(result.document.timeouts).toEqual(DEFAULT_ROUTE_TIMEOUTS);
    expect(result.document.fallback).toEqual({ staleIfErrorSeconds: 0 });
  });

  it("takes timeouts.streamIdleMs with 0 meaning off, and names the field when it is negative", () => {
    const route = (streamIdleMs: number) =>
      validateResource("routes", "sse", {
        match: { pathPrefix: "/sse" },
        upstream: "agents",
        timeouts: { streamIdleMs },
      });
    const off = route(0);
    expect(off.ok && off.document.timeouts.streamIdleMs).toBe(0);
    const bad = route(-1);
    expect(bad.ok ? [] : bad.problems.map((problem) => problem.field)).toEqual([
      "timeouts.streamIdleMs",
    ]);
  });

  it("fills a breaker from the shared policy defaults", () => {
    expect(validateResource("breakers", "strict", {})).toEqual({
      ok: true,
      document: { ...DEFAULT_BREAKER_POLICY },
    });
  });

  it.each([
    [
      "upstreams",
      { nodes: [{ address: "10.0.0.1" }], healthCheck: { path: "/h z" } },
      [
        { field: "nodes.0.address", message: "must be host:port; is not host:port" },
        {
          field: "healthCheck.path",
          message: expect.stringContaining("has a space at 2; percent-encode it"),
        },
      ],
    ],
    [
      "routes",
      { match: { pathPrefix: "/a%2Fb", hosts: ["a.com:80"] }, upstream: "x", colour: "red" },
      [
        { field: "colour", message: "unknown field" },
        { field: "match.hosts.0", message: "must be a host name or *.suffix, without port" },
        { field: "match.pathPrefix", message: expect.stringContaining('must start with "/"') },
      ],
    ],
    [
      "breakers",
      { cooldownMs: 10_000, maxCooldownMs: 5_000 },
      [{ field: "maxCooldownMs", message: "must be at least cooldownMs (10000)" }],
    ],
    [
      "tenants",
      { apiKeySha256: ["nothex"] },
      [{ field: "apiKeySha256.0", message: "must be 64 hex digits" }],
    ],
  ] as const)("returns structured problems for a bad %s document", (kind, document, fields) => {
    const result = validateResource(kind, "bad", document);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toHaveLength(fields.length);
    for (const field of fields) {
      expect(result.problems).toContainEqual({ kind, name: "bad", ...field });
    }
  });

  it("refuses a name outside [a-z0-9][a-z0-9-]{0,62}, naming it", () => {
    expect(validateResource("routes", "Bad_Name", {})).toEqual({
      ok: false,
      problems: [
        {
          kind: "routes",
          name: "Bad_Name",
          field: "",
          message:
            "name must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
        },
      ],
    });
  });
});

describe("referenceProblems", () => {
  it("names each route to a missing upstream and each upstream to a missing breaker", () => {
    const problems = referenceProblems({
      routes: [
        { name: "api", upstream: "gone" },
        { name: "canary", split: [{ upstream: "agents" }, { upstream: "missing" }] },
      ],
      upstreams: [
        { name: "agents", breaker: "strict" },
        { name: "other", breaker: "default" },
      ],
      upstreamNames: new Set(["agents", "other"]),
      breakerNames: new Set<string>(),
    });
    expect(problems).toEqual([
      {
        kind: "routes",
        name: "api",
        field: "upstream",
        message: "names upstream gone, which does not exist",
      },
      {
        kind: "routes",
        name: "canary",
        field: "split.1.upstream",
        message: "names upstream missing, which does not exist",
      },
      {
        kind: "upstreams",
        name: "agents",
        field: "breaker",
        message: "names breaker strict, which does not exist",
      },
    ]);
  });
});

describe("validateSnapshot", () => {
  it("passes a complete, consistent snapshot", () => {
    const snapshot = create(SnapshotSchema, {
      version: 3n,
      breakers: [{ name: "default" }],
      upstreams: [
        { name: "agents", breaker: "default", nodes: [{ address: "[::1]:80", weight: 2 }] },
      ],
      routes: [{ name: "api", match: { pathPrefix: "/api" }, upstream: "agents" }],
    });
    expect(validateSnapshot(snapshot)).toEqual([]);
  });

  it("returns one structured problem per broken rule, each naming its resource and field", () => {
    const snapshot = create(SnapshotSchema, {
      version: 2n ** 60n,
      upstreams: [
        {
          name: "u",
          nodes: [
            { address: "h:80", weight: 1 },
            { address: "h:80", weight: 0 },
          ],
        },
        { name: "u" },
      ],
      routes: [
        { name: "r", match: { path: "/", methods: ["get"] }, split: [{ upstream: "u" }] },
        { name: "t", match: {}, upstream: "nope", rewrite: { host: "a b" } },
      ],
    });
    expect(validateSnapshot(snapshot).map(formatProblem)).toEqual([
      "snapshot: version is beyond 2^53",
      'upstream "u": name is repeated',
      'upstream "u": nodes.1.address repeats "h:80"',
      'upstream "u": nodes.1.weight must be 1..1000, got 0',
      'route "r": match.methods.0 must be upper case',
      'route "r": split.0.weight must be 1..1000000, got 0',
      'route "t": match sets neither path nor pathPrefix; set one',
      'route "t": rewrite.host is not a host[:port]',
      'route "t": upstream names upstream nope, which does not exist',
    ]);
  });
});
