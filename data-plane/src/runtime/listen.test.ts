import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ListenError, listen } from "./listen.js";

const servers: ReturnType<typeof createServer>[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

function server() {
  const s = createServer();
  servers.push(s);
  return s;
}

describe("listen", () => {
  it("resolves with the bound address, the real port when 0 was asked for", async () => {
    const bound = await listen(server(), "proxy", "127.0.0.1:0");
    expect(bound).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(bound).not.toBe("127.0.0.1:0");
  });

  it("rejects with a ListenError naming the address when the port is taken", async () => {
    const taken = await listen(server(), "first", "127.0.0.1:0");
    const err = await listen(server(), "admin", taken).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ListenError);
    expect(err).toMatchObject({ code: "EADDRINUSE", address: taken });
    expect((err as Error).message).toContain(`admin cannot listen on ${taken}: EADDRINUSE`);
  });
});
