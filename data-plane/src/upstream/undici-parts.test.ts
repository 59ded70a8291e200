import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";

const require = createRequire(import.meta.url);
const undiciIndex = require.resolve("undici");

describe("undici parts", () => {
  it("lets the proxy's request path run without loading undici's index", async () => {
    // What a data plane imports to proxy: the pools, their TLS connector, the pipeline's end.
    await import("./pool-registry.js");
    await import("./tls-connector.js");
    await import("../proxy/pipeline/send-to-node.js");
    expect(require.cache[undiciIndex]).toBeUndefined();
    // Still with the helpers undici's types promise on every dispatcher.
    const { Pool } = await import("./undici-parts.js");
    for (const helper of ["request", "stream", "pipeline", "connect", "upgrade"] as const) {
      expect(typeof Pool.prototype[helper]).toBe("function");
    }
  });

  it("are the very classes undici's index exports", async () => {
    const parts = await import("./undici-parts.js");
    const undici = await import("undici");
    expect(parts.Pool).toBe(undici.Pool);
    expect(parts.errors).toBe(undici.errors);
    expect(parts.buildConnector).toBe(undici.buildConnector);
    expect(new parts.errors.HeadersTimeoutError().code).toBe("UND_ERR_HEADERS_TIMEOUT");
  });
});
