import { createServer } from "node:http";
import { isConfigError } from "@clawgate/runtime";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../config/load-config.js";
import { applyListenerLimits, listenerServerOptions } from "./listener-limits.js";

describe("proxy listener limits", () => {
  it("sets the headers timeout on its own, the request timeout explicitly, and the connection cap", () => {
    const config = loadConfig({
      argv: [],
      env: {
        CLAWGATE_PROXY_KEEPALIVE_TIMEOUT_MS: "3600000",
        CLAWGATE_PROXY_HEADERS_TIMEOUT_MS: "20000",
        CLAWGATE_PROXY_REQUEST_TIMEOUT_MS: "120000",
        CLAWGATE_PROXY_MAX_CONNECTIONS: "10000",
      },
    });
    const server = createServer(listenerServerOptions(config));
    applyListenerLimits(server, config);
    expect(server.keepAliveTimeout).toBe(3_600_000);
    // It followed the keep-alive timeout (plus 1 s): an hour to send headers.
    expect(server.headersTimeout).toBe(20_000);
    expect(server.requestTimeout).toBe(120_000);
    expect(server.maxConnections).toBe(10_000);
  });

  it("defaults to nginx's 60 s headers timeout, node:http's 300 s request timeout and no cap", () => {
    const config = loadConfig({ argv: [], env: {} });
    const server = createServer(listenerServerOptions(config));
    applyListenerLimits(server, {
      ...config,
      proxyKeepAliveTimeoutMs: 65_000,
    });
    expect(server.headersTimeout).toBe(60_000);
    expect(server.requestTimeout).toBe(300_000);
    // node:http's own "no cap" (undefined on Node 20, Infinity on later ones).
    expect([undefined, Number.POSITIVE_INFINITY]).toContain(server.maxConnections);
  });

  it("checks a headers timeout twice within it, at most every 30 s (Node's own interval)", () => {
    const options = (headers: number) =>
      listenerServerOptions({
        proxyKeepAliveTimeoutMs: 65_000,
        proxyHeadersTimeoutMs: headers,
        proxyRequestTimeoutMs: 300_000,
        proxyMaxConnections: undefined,
      }).connectionsCheckingInterval;
    expect(options(1_000)).toBe(500);
    expect(options(60_000)).toBe(30_000);
    expect(options(600_000)).toBe(30_000);
  });

  it("refuses a request timeout below the headers timeout, naming the field", () => {
    let error: unknown;
    try {
      loadConfig({
        argv: [],
        env: {
          CLAWGATE_PROXY_HEADERS_TIMEOUT_MS: "20000",
          CLAWGATE_PROXY_REQUEST_TIMEOUT_MS: "10000",
        },
      });
    } catch (thrown) {
      error = thrown;
    }
    expect(isConfigError(error)).toBe(true);
    expect(String((error as Error).message)).toMatch(/proxyRequestTimeoutMs/);
  });
});
