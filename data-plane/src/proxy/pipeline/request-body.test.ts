import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { Exchange } from "./exchange.js";
import { clientGone } from "./exchange-abort.js";
import { requestBody } from "./request-body.js";

describe("request-body stage", () => {
  function upload(declared: number) {
    const world = stageWorld();
    const template = world.exchange({ method: "POST" });
    const req = Object.assign(new PassThrough(), { socket: { destroyed: false } });
    const exchange = new Exchange(
      req as unknown as IncomingMessage,
      template.res,
      template.route,
      template.target,
      template.healing,
      "POST",
      "/",
      [],
      req as unknown as IncomingMessage,
      undefined,
      "req-1",
      0,
      declared,
    );
    const down = fakeDispatch();
    const above = new RecordingHandler();
    requestBody()(down)(exchange, above);
    return { req, exchange, down, above };
  }

  it("reads a declared body whole before the first attempt, which then sends one buffer", () => {
    const { req, exchange, down } = upload(6);
    req.write("abc");
    expect(down.attempts).toHaveLength(0);
    req.end("def");
    return new Promise<void>((resolve) => {
      req.once("end", () => {
        expect(down.attempts).toHaveLength(1);
        expect(Buffer.isBuffer(exchange.body)).toBe(true);
        expect(String(exchange.body)).toBe("abcdef");
        resolve();
      });
      req.resume();
    });
  });

  it("ends the request as client_gone when the client aborts the upload", () => {
    const { req, down, above } = upload(6);
    req.write("abc");
    above.controller!.abort(clientGone());
    expect(above.events).toEqual(["failure client_gone"]);
    req.end("def");
    expect(down.attempts).toHaveLength(0);
  });

  it("passes a request without a body to buffer straight through", () => {
    const world = stageWorld();
    const down = fakeDispatch();
    requestBody()(down)(world.exchange(), new RecordingHandler());
    expect(down.attempts).toHaveLength(1);
  });
});
