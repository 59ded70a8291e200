import { randomBytes } from "node:crypto";
import { once } from "node:events";
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { STREAM_USAGE_BODY_LIMIT } from "../../quota/stream-usage-request.js";
import { ReplayableBody } from "../../retry/replayable-body.js";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import type { RouteInit } from "../../testing/route-table-fixture.js";
import { DeadlineSweep } from "./deadline-sweep.js";
import { Exchange, UNKNOWN_BODY_LENGTH } from "./exchange.js";
import { clientGone } from "./exchange-abort.js";
import { requestBody } from "./request-body.js";

/** Everything an async-iterable body yields, in one buffer (what the upstream would get). */
async function drain(body: unknown): Promise<Buffer> {
  const source = body instanceof ReplayableBody ? body.attempt() : (body as AsyncIterable<Buffer>);
  const chunks: Buffer[] = [];
  for await (const chunk of source) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

describe("request-body stage", () => {
  function upload(
    declared: number,
    route?: RouteInit,
    replayLimitBytes = 64 * 1024,
    sweep = new DeadlineSweep(),
  ) {
    const world = stageWorld(route === undefined ? {} : { route });
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
    requestBody(replayLimitBytes, sweep)(down)(exchange, above);
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

  describe("the route's deadlines while the body is read", () => {
    afterEach(() => vi.useRealTimers());

    /** A read on a fake clock: the sweep reads Date.now(), which the fake timers step. */
    function slowUpload(timeouts: { bodyMs: number; totalMs: number }) {
      vi.useFakeTimers();
      const sweep = new DeadlineSweep(() => Date.now());
      return upload(6, { timeouts, retry: { attempts: 1 } }, 64 * 1024, sweep);
    }

    it("answers 408 when no chunk comes for bodyMs; each chunk restarts the gap; nothing goes upstream", () => {
      const { req, exchange, down, above } = slowUpload({ bodyMs: 1_000, totalMs: 60_000 });
      req.write("ab");
      vi.advanceTimersByTime(999);
      req.write("cd");
      vi.advanceTimersByTime(999);
      expect(above.failures).toHaveLength(0);
      vi.advanceTimersByTime(1);
      expect(above.failures).toEqual([{ kind: "rejected", code: "CLAWGATE_REQUEST_TIMEOUT" }]);
      expect(exchange.res.shouldKeepAlive).toBe(false);
      // The rest of the body arriving later sends no partial or late request upstream.
      req.end("ef");
      expect(down.attempts).toHaveLength(0);
    });

    it("answers 408 when a body trickling within bodyMs takes longer than totalMs", () => {
      const { req, down, above } = slowUpload({ bodyMs: 1_000, totalMs: 2_500 });
      for (let i = 0; i < 2; i++) {
        req.write("a");
        vi.advanceTimersByTime(900);
      }
      req.write("b");
      vi.advanceTimersByTime(699);
      expect(above.failures).toHaveLength(0);
      vi.advanceTimersByTime(1);
      expect(above.failures).toEqual([{ kind: "rejected", code: "CLAWGATE_REQUEST_TIMEOUT" }]);
      req.end("cde");
      expect(down.attempts).toHaveLength(0);
    });

    it("a body read in time leaves no deadline behind", async () => {
      const { req, down, above } = slowUpload({ bodyMs: 1_000, totalMs: 2_500 });
      req.end("abcdef");
      req.resume();
      await vi.waitFor(() => expect(down.attempts).toHaveLength(1));
      vi.advanceTimersByTime(5_000);
      expect(above.failures).toHaveLength(0);
    });
  });

  it("passes a request without a body to buffer straight through", () => {
    const world = stageWorld();
    const down = fakeDispatch();
    requestBody()(down)(world.exchange(), new RecordingHandler());
    expect(down.attempts).toHaveLength(1);
  });

  describe("a body of unknown length (chunked, or HTTP/2 without content-length)", () => {
    const usageRoute: RouteInit = { usage: { injectStreamUsage: true } };
    const piece = (bytes: number) => randomBytes(bytes);

    it("is read whole when it ends within the usage limit, then sent as one buffer", async () => {
      const { req, exchange, down } = upload(UNKNOWN_BODY_LENGTH, usageRoute);
      req.write('{"stream":');
      req.end("true}");
      await once(req, "end");
      expect(down.attempts).toHaveLength(1);
      expect(Buffer.isBuffer(exchange.body)).toBe(true);
      expect(String(exchange.body)).toBe('{"stream":true}');
    });

    it("past the limit goes on as a stream at once: what was read, then the rest, byte for byte", async () => {
      const { req, exchange, down } = upload(UNKNOWN_BODY_LENGTH, usageRoute);
      const sent = [piece(600 * 1024), piece(600 * 1024), piece(300 * 1024)];
      req.write(sent[0]);
      req.write(sent[1]);
      // The attempt starts while the client is still sending: nothing waits for the end.
      await vi.waitFor(() => expect(down.attempts).toHaveLength(1));
      expect(Buffer.isBuffer(exchange.body)).toBe(false);
      req.end(sent[2]);
      expect((await drain(exchange.body)).equals(Buffer.concat(sent))).toBe(true);
    });

    it("past the limit on a retrying route is replayed whole by a second attempt within the replay limit", async () => {
      const { req, exchange, down } = upload(
        UNKNOWN_BODY_LENGTH,
        { ...usageRoute, retry: { attempts: 1 } },
        4 * STREAM_USAGE_BODY_LIMIT,
      );
      const sent = Buffer.concat([piece(STREAM_USAGE_BODY_LIMIT), piece(1024)]);
      req.write(sent.subarray(0, STREAM_USAGE_BODY_LIMIT));
      req.end(sent.subarray(STREAM_USAGE_BODY_LIMIT));
      await vi.waitFor(() => expect(down.attempts).toHaveLength(1));
      expect(exchange.body).toBeInstanceOf(ReplayableBody);
      // Both attempts send the chunks read before the limit as well as the rest.
      expect((await drain(exchange.body)).equals(sent)).toBe(true);
      expect((await drain(exchange.body)).equals(sent)).toBe(true);
    });

    it("past the limit, a streaming JSON request gets include_usage at its end, replayed whole", async () => {
      const { req, exchange, down } = upload(
        UNKNOWN_BODY_LENGTH,
        { ...usageRoute, retry: { attempts: 1 } },
        4 * STREAM_USAGE_BODY_LIMIT,
      );
      const sent = Buffer.from(`{"stream":true,"pad":"${"x".repeat(STREAM_USAGE_BODY_LIMIT)}"}`);
      req.write(sent.subarray(0, STREAM_USAGE_BODY_LIMIT));
      req.end(sent.subarray(STREAM_USAGE_BODY_LIMIT));
      await vi.waitFor(() => expect(down.attempts).toHaveLength(1));
      expect(exchange.body).toBeInstanceOf(ReplayableBody);
      const upstream = Buffer.concat([
        sent.subarray(0, -1),
        Buffer.from(',"stream_options":{"include_usage":true}}'),
      ]);
      // A retry sends the same bytes: the field is added once, as the client's body is read.
      expect((await drain(exchange.body)).equals(upstream)).toBe(true);
      expect((await drain(exchange.body)).equals(upstream)).toBe(true);
      // Recorded for the response side (the usage chunk kept from the client) and the log.
      expect(exchange.stripStreamUsage).toBe(true);
      expect(exchange.clientBodyBytes).toBe(sent.length);
    });

    it("past the limit and past the replay limit, streams once and says it cannot be replayed", async () => {
      const { req, exchange, down } = upload(UNKNOWN_BODY_LENGTH, {
        ...usageRoute,
        retry: { attempts: 1 },
      });
      const sent = piece(STREAM_USAGE_BODY_LIMIT + 1);
      req.end(sent);
      await vi.waitFor(() => expect(down.attempts).toHaveLength(1));
      expect((await drain(exchange.body)).equals(sent)).toBe(true);
      // Read past the 64 KiB replay limit: a retry could not send it again.
      expect((exchange.body as ReplayableBody).replayable).toBe(false);
    });

    it("fails the request as client_gone when the client leaves within the limit; no attempt", async () => {
      const { req, down, above } = upload(UNKNOWN_BODY_LENGTH, usageRoute);
      req.write(piece(1024));
      req.destroy();
      await once(req, "close");
      expect(above.events).toEqual(["failure client_gone"]);
      expect(down.attempts).toHaveLength(0);
    });

    it("fails the attempt's body when the client leaves past the limit", async () => {
      const { req, exchange, down } = upload(UNKNOWN_BODY_LENGTH, usageRoute);
      req.write(piece(STREAM_USAGE_BODY_LIMIT + 1));
      await vi.waitFor(() => expect(down.attempts).toHaveLength(1));
      const reading = drain(exchange.body);
      req.destroy(new Error("aborted"));
      // The upstream request reading it fails with it, and is aborted (send-to-node.ts).
      await expect(reading).rejects.toThrow();
    });

    it("answers 413 past a maxBodyBytes below the usage limit, with no attempt", async () => {
      const { req, down, above } = upload(UNKNOWN_BODY_LENGTH, {
        ...usageRoute,
        maxBodyBytes: 1000n,
      });
      req.write(piece(800));
      req.write(piece(800));
      await vi.waitFor(() => expect(above.failures).toHaveLength(1));
      expect(above.failures[0]).toMatchObject({
        kind: "rejected",
        code: "CLAWGATE_PAYLOAD_TOO_LARGE",
      });
      expect(down.attempts).toHaveLength(0);
    });
  });
});
