import { type AddressInfo, createServer, type Socket } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { probeNode } from "./probe.js";

/*
 * A probe's first HTTP check imports node:http in the probe thread (lazily: most checks are TCP
 * only). Here that import is held back until the probe has ended, as a busy machine might slow
 * it: the probe must still end by its deadline.
 */

const gate = vi.hoisted(() => {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open: () => open() };
});

vi.mock("node:http", async (importOriginal) => {
  await gate.opened;
  return importOriginal();
});

const sockets = new Set<Socket>();
const server = createServer((socket) => {
  sockets.add(socket);
  socket.on("error", () => {});
});
afterEach(async () => {
  gate.open();
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("probeNode, its first HTTP check", () => {
  it("counts loading Node's HTTP module in its timeout, and sends nothing when that runs out", async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const outcome = await probeNode({
      host: "127.0.0.1",
      port,
      timeoutMs: 500,
      path: "/healthz",
      expectStatus: "",
    });
    expect(outcome.ok).toBe(false);
    expect(outcome.evidence.error).toBe("http timeout");
    // Only the TCP screen's connection: no HTTP request was started after the deadline.
    expect(sockets.size).toBe(1);
  });
});
