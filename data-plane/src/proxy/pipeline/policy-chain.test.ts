import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { policyChain } from "./policy-chain.js";

describe("policy chain stage", () => {
  it("a route without policies goes down with the very handler it came with", () => {
    const world = stageWorld();
    const down = fakeDispatch();
    const handler = new RecordingHandler();
    policyChain(world.deps.healing)(down)(world.exchange(), handler);
    expect(down.attempts[0]!.handler).toBe(handler);
  });

  it("a policy's error answer ends the request before anything under the stage", () => {
    const world = stageWorld({ route: { name: "r", auth: { tenants: "required" } } });
    const down = fakeDispatch();
    const exchange = world.exchange();
    Object.assign(exchange.req, { headers: {} });
    const handler = new RecordingHandler(exchange);
    policyChain(world.deps.healing)(down)(exchange, handler);
    expect(down.attempts).toHaveLength(0);
    expect(handler.events).toEqual(["failure rejected"]);
    expect(handler.failures[0]!.code).toBe("CLAWGATE_UNAUTHORIZED");
  });

  it("a preflight is answered as a response of the gateway's own", () => {
    const world = stageWorld({
      route: { name: "r", cors: { allowOrigins: ["https://a.example"], maxAgeSeconds: 60 } },
    });
    const down = fakeDispatch();
    const exchange = world.exchange({ method: "OPTIONS" });
    Object.assign(exchange.req, {
      headers: { origin: "https://a.example", "access-control-request-method": "PUT" },
    });
    const handler = new RecordingHandler(exchange);
    policyChain(world.deps.healing)(down)(exchange, handler);
    expect(down.attempts).toHaveLength(0);
    expect(handler.events).toEqual(["start 204", "end"]);
  });

  it("response policies edit the upstream's head on its way up", () => {
    const world = stageWorld({
      route: { name: "r", responseHeaders: { set: { "x-by": "gw" }, remove: [] } },
    });
    const down = fakeDispatch();
    const exchange = world.exchange();
    policyChain(world.deps.healing)(down)(exchange, new RecordingHandler(exchange));
    const headers: Record<string, string> = {};
    down.attempts[0]!.start().respond(200, headers, "ok");
    expect(headers).toEqual({ "x-by": "gw" });
  });
});
