import { expect } from "vitest";
import { type ControlPlane, type DataPlane, describeExit, waitFor } from "../support/index.js";
import type { EchoUpstream } from "./echo-upstream.js";
import type { Frame } from "./ws-frames.js";

/** What these checks need of a tunnel, over HTTP/1.1 (WsClient) or HTTP/2 (WsH2Client). */
interface Tunnel {
  send(text: string): void;
  next(): Promise<Frame>;
  closed: Promise<void>;
}

/**
 * Writes another route (route "other" to upstream "echo") and expects the open `ws`, echoing
 * through `dp`, to carry a message once `dp` applied the new snapshot: a reload keeps tunnels.
 */
export async function expectTunnelSurvivesReload(
  cp: ControlPlane,
  dp: DataPlane,
  ws: Tunnel,
): Promise<void> {
  const before = await dp.snapshotVersion();
  await cp.admin.putRoute("other", { match: { pathPrefix: "/other" }, upstream: "echo" });
  await waitFor(async () => ((await dp.snapshotVersion()) ?? 0) > (before ?? 0), {
    what: "the data plane to apply the new route",
  });
  ws.send("still there");
  expect((await ws.next()).payload.toString()).toBe("echo: still there");
}

/**
 * Sends `dp` SIGTERM and expects the open `ws` to be told "going away" (1001) after the drain
 * delay and to end, `dp` to exit 0, and `upstream`'s side of the tunnel to close.
 */
export async function expectTunnelClosedOnDrain(
  dp: DataPlane,
  ws: Tunnel,
  upstream: EchoUpstream,
): Promise<void> {
  process.kill(dp.process.pid, "SIGTERM");
  const close = await ws.next();
  expect(close.opcode).toBe(0x8);
  expect(close.payload.readUInt16BE(0)).toBe(1001);
  await ws.closed;
  expect(describeExit(await dp.process.exited)).toBe("code 0");
  await waitFor(() => upstream.open === 0, { what: "the upstream side of the tunnel to close" });
}
