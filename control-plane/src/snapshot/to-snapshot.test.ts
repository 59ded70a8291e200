import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { SnapshotSchema, toBinary, toJson } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { readRegistryNodes } from "../registry/registered-node.js";
import { readConfigState } from "../resources/config-state.js";
import type { KeyValue } from "../store/store.js";
import { toSnapshot } from "./to-snapshot.js";

const PREFIX = "/clawgate/";

// Documents as platform teams write them: defaults left out on purpose, so the golden file
// shows that the translation spells every default out.
const documents: Record<string, unknown> = {
  "upstreams/agents": {
    nodes: [{ address: "10.0.0.5:8080", weight: 3 }, { address: "10.0.0.6:8080" }],
    healthCheck: { path: "/healthz", expectStatus: "ok" },
    remediation: {
      command: ["systemctl", "restart", "agent@{port}.service"],
      webhookUrl: "https://ops:secret@hooks.example.com/restart",
    },
  },
  "upstreams/tools": {
    nodes: [{ address: "tools.internal:9000" }],
    healthCheck: { path: null, intervalMs: 2000 },
    breaker: "strict",
    maxConnectionsPerNode: 16,
    keepAliveTimeoutMs: 30_000,
    // Paths only travel; verify goes as its inverse, so it is spelt out even when left out.
    tls: { caFile: "/etc/clawgate/tools-ca.pem", serverName: "tools.internal" },
    hostRewrite: true,
  },
  "upstreams/canary": { nodes: [{ address: "10.0.1.1:8080" }] },
  "routes/api": {
    match: {
      pathPrefix: "/api",
      hosts: ["api.example.com"],
      methods: ["GET", "POST"],
      headers: { "X-Tenant": "acme", Accept: "application/json" },
    },
    priority: 10,
    split: [
      { upstream: "agents", weight: 90 },
      { upstream: "canary", weight: 10 },
    ],
    rewrite: { pathPrefix: "/" },
    retry: { attempts: 2, on: ["connect-failure", "reset", "5xx"] },
    timeouts: { connectMs: 500 },
    fallback: { staleIfErrorSeconds: 300 },
  },
  "routes/tool-call": { match: { path: "/tools/call" }, upstream: "tools" },
  "breakers/strict": { consecutiveFailures: 2, cooldownMs: 5000, maxCooldownMs: 60000 },
  "tenants/acme": {
    apiKeySha256: ["a".repeat(64)],
    requestsPerMinute: 600,
    tokensPerDay: 5_000_000_000,
    allowedRoutes: ["api"],
  },
  // Self-registered nodes: merged after the document's nodes, sorted by id; the document wins
  // an address clash (node-a); a registration for an upstream that does not exist is dropped.
  "registry/agents/node-b": registration("10.0.0.7:8080", 2),
  "registry/agents/node-a": registration("10.0.0.5:8080", 9),
  "registry/agents/node-c": registration("10.0.0.8:8080", 1),
  "registry/canary/zz": registration("10.0.1.2:8080", 1),
  "registry/deleted-upstream/x": registration("10.0.9.9:8080", 1),
};

function registration(address: string, weight: number) {
  return { address, weight, ttlSeconds: 10, registeredAt: "2025-01-01T00:00:00.000Z" };
}

function stateOf(docs: Record<string, unknown>) {
  // Deliberately out of name order: the snapshot must sort.
  const items: KeyValue[] = Object.entries(docs)
    .reverse()
    .map(([path, doc], index) => ({
      key: `${PREFIX}${path}`,
      value: JSON.stringify(doc),
      modRevision: index + 2,
      createRevision: index + 2,
    }));
  const read = readConfigState(PREFIX, { revision: 42, items });
  expect(read.invalid).toEqual([]);
  const registry = readRegistryNodes(PREFIX, items);
  expect(registry.invalid).toEqual([]);
  return [read.state, registry.nodes] as const;
}

function snapshotOf(docs: Record<string, unknown>) {
  const [state, registry] = stateOf(docs);
  return toSnapshot(state, stamp, registry);
}

const stamp = { version: 42, nonce: "cp-1-42", createdAtMs: 1_764_000_000_000 };

describe("toSnapshot", () => {
  it("matches the golden file", () => {
    const snapshot = snapshotOf(documents);
    const json = `${JSON.stringify(toJson(SnapshotSchema, snapshot, { alwaysEmitImplicit: true }), null, 2)}\n`;
    const golden = fileURLToPath(new URL("./testdata/snapshot.golden.json", import.meta.url));
    if (process.env.UPDATE_GOLDEN) writeFileSync(golden, json);
    expect(json).toBe(readFileSync(golden, "utf8"));
  });

  it("leaves remediation out: only the control plane runs it, and its webhook may hold secrets", () => {
    const bytes = toBinary(SnapshotSchema, snapshotOf(documents));
    const text = Buffer.from(bytes).toString("latin1");
    expect(text).not.toContain("systemctl");
    expect(text).not.toContain("secret");
    expect(text).toContain("10.0.0.5:8080");
  });

  it("adds the built-in default breaker only when none named default is stored", () => {
    const builtIn = snapshotOf({});
    expect(builtIn.breakers.map((b) => [b.name, b.consecutiveFailures])).toEqual([["default", 5]]);

    const stored = snapshotOf({
      "breakers/default": { consecutiveFailures: 9 },
      "breakers/aaa": {},
      "breakers/zzz": {},
    });
    expect(stored.breakers.map((b) => [b.name, b.consecutiveFailures])).toEqual([
      ["aaa", 5],
      ["default", 9],
      ["zzz", 5],
    ]);
  });

  it("merges registered nodes after the document's, marking each node's source", () => {
    const snapshot = snapshotOf(documents);
    const nodes = (name: string) =>
      snapshot.upstreams
        .find((upstream) => upstream.name === name)
        ?.nodes.map((node) => `${node.address}*${node.weight}:${node.source}`);
    expect(nodes("agents")).toEqual([
      "10.0.0.5:8080*3:config",
      "10.0.0.6:8080*1:config",
      "10.0.0.7:8080*2:registry",
      "10.0.0.8:8080*1:registry",
    ]);
    expect(nodes("canary")).toEqual(["10.0.1.1:8080*1:config", "10.0.1.2:8080*1:registry"]);
    expect(snapshot.upstreams.map((upstream) => upstream.name)).toEqual([
      "agents",
      "canary",
      "tools",
    ]);
    // Without a registry argument only the document's nodes are there.
    const [state] = stateOf(documents);
    expect(toSnapshot(state, stamp).upstreams[0]?.nodes.map((n) => n.source)).toEqual([
      "config",
      "config",
    ]);
  });

  it("carries prototype keys as names, hosts, header conditions and registry ids", () => {
    const snapshot = snapshotOf({
      "breakers/constructor": {},
      "upstreams/prototype": { nodes: [{ address: "10.0.0.1:80" }], breaker: "constructor" },
      "routes/constructor": {
        match: {
          pathPrefix: "/",
          hosts: ["constructor"],
          headers: { constructor: "a", toString: "b", valueOf: "c", hasOwnProperty: "d" },
        },
        upstream: "prototype",
      },
      "tenants/constructor": { allowedRoutes: ["constructor"] },
      "registry/prototype/constructor": registration("10.0.0.2:80", 1),
    });
    expect(snapshot.routes.map((route) => route.match?.headers)).toEqual([
      [
        { $typeName: "clawgate.v1.HeaderMatch", name: "constructor", value: "a" },
        { $typeName: "clawgate.v1.HeaderMatch", name: "hasownproperty", value: "d" },
        { $typeName: "clawgate.v1.HeaderMatch", name: "tostring", value: "b" },
        { $typeName: "clawgate.v1.HeaderMatch", name: "valueof", value: "c" },
      ],
    ]);
    expect(snapshot.routes[0]?.match?.hosts).toEqual(["constructor"]);
    expect(snapshot.upstreams[0]?.nodes.map((node) => `${node.address}:${node.source}`)).toEqual([
      "10.0.0.1:80:config",
      "10.0.0.2:80:registry",
    ]);
    expect(snapshot.breakers.map((breaker) => breaker.name)).toEqual(["constructor", "default"]);
    expect(snapshot.tenants.map((tenant) => tenant.name)).toEqual(["constructor"]);
  });

  it("yields the same bytes for the same state whatever the read order", () => {
    const a = snapshotOf(documents);
    const reversed = Object.fromEntries(Object.entries(documents).reverse());
    const b = snapshotOf(reversed);
    expect(toJson(SnapshotSchema, b)).toEqual(toJson(SnapshotSchema, a));
  });
});
