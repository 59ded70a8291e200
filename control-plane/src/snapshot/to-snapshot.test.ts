import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { SnapshotSchema, toJson } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
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
    remediation: { command: ["systemctl", "restart", "agent@{port}.service"] },
  },
  "upstreams/tools": {
    nodes: [{ address: "tools.internal:9000" }],
    healthCheck: { path: null, intervalMs: 2000 },
    breaker: "strict",
    maxConnectionsPerNode: 16,
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
};

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
  return read.state;
}

const stamp = { version: 42, nonce: "cp-1-42", createdAtMs: 1_764_000_000_000 };

describe("toSnapshot", () => {
  it("matches the golden file", () => {
    const snapshot = toSnapshot(stateOf(documents), stamp);
    const json = `${JSON.stringify(toJson(SnapshotSchema, snapshot, { alwaysEmitImplicit: true }), null, 2)}\n`;
    const golden = fileURLToPath(new URL("./testdata/snapshot.golden.json", import.meta.url));
    if (process.env.UPDATE_GOLDEN) writeFileSync(golden, json);
    expect(json).toBe(readFileSync(golden, "utf8"));
  });

  it("adds the built-in default breaker only when none named default is stored", () => {
    const builtIn = toSnapshot(stateOf({}), stamp);
    expect(builtIn.breakers.map((b) => [b.name, b.consecutiveFailures])).toEqual([["default", 5]]);

    const stored = toSnapshot(
      stateOf({
        "breakers/default": { consecutiveFailures: 9 },
        "breakers/aaa": {},
        "breakers/zzz": {},
      }),
      stamp,
    );
    expect(stored.breakers.map((b) => [b.name, b.consecutiveFailures])).toEqual([
      ["aaa", 5],
      ["default", 9],
      ["zzz", 5],
    ]);
  });

  it("yields the same bytes for the same state whatever the read order", () => {
    const a = toSnapshot(stateOf(documents), stamp);
    const reversed = Object.fromEntries(Object.entries(documents).reverse());
    const b = toSnapshot(stateOf(reversed), stamp);
    expect(toJson(SnapshotSchema, b)).toEqual(toJson(SnapshotSchema, a));
  });
});
