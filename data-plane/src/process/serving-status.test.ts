import type { Notifier } from "@clawgate/runtime";
import { describe, expect, it } from "vitest";
import { ServingStatus } from "./serving-status.js";

function recordingNotifier() {
  const sent: string[] = [];
  let ready = false;
  let lastStatus = "";
  const notifier: Notifier = {
    enabled: true,
    ready: () => {
      if (!ready) sent.push("READY=1");
      ready = true;
    },
    status: (text) => {
      if (text !== lastStatus) sent.push(`STATUS=${text}`);
      lastStatus = text;
    },
    stopping: () => sent.push("STOPPING=1"),
    watchdog: () => {},
    close: () => {},
  };
  return { sent, notifier };
}

describe("ServingStatus", () => {
  it("is READY only once listening and a snapshot is applied, and says where it came from", () => {
    const { sent, notifier } = recordingNotifier();
    const status = new ServingStatus(notifier);
    status.connection({ status: "connecting", address: "cp-a:9190" });
    status.connection({
      status: "waiting",
      nextAddress: "cp-b:9190",
      retryInMs: 250,
      reason: "no connection within 5000 ms",
    });
    status.listening();
    expect(sent).not.toContain("READY=1");
    status.applied(41, "cache");
    status.connection({ status: "connected", address: "cp-b:9190" });
    status.applied(42, "control-plane");
    status.connection({ status: "waiting", nextAddress: "cp-a:9190", retryInMs: 1, reason: "x" });
    status.stopping();
    expect(sent).toEqual([
      "STATUS=waiting for the control plane at cp-a:9190",
      "STATUS=waiting for the control plane (last attempt: no connection within 5000 ms; next cp-b:9190)",
      "STATUS=serving cached version 41 while the control plane is unreachable",
      "READY=1",
      "STATUS=serving cached version 41; connected to the control plane at cp-b:9190",
      "STATUS=serving version 42",
      "STATUS=serving version 42; the control plane is unreachable, reconnecting",
      "STATUS=stopping: draining requests in flight",
    ]);
  });

  it("does not send READY for a snapshot applied before the listeners are bound", () => {
    const { sent, notifier } = recordingNotifier();
    const status = new ServingStatus(notifier);
    status.applied(3, "control-plane");
    expect(sent).toEqual([
      "STATUS=serving version 3; the control plane is unreachable, reconnecting",
    ]);
    status.listening();
    expect(sent.at(-1)).toBe("READY=1");
  });
});
