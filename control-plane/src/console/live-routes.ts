import type { FastifyPluginAsync } from "fastify";
import type { LiveEvent, LiveFeed } from "./live-feed.js";

export interface LiveRoutesOptions {
  feed: LiveFeed;
  /**
   * Interval between heartbeat comments; default 15 s, under the 60 s idle timeout of common
   * proxies and load balancers, so a quiet fleet does not look like a dead connection.
   */
  heartbeatMs?: number;
  /**
   * Bytes a client may leave unread in its socket's write queue; past that it is dropped (it
   * reconnects and reloads), never buffered without bound. Default 1 MiB: hundreds of events.
   */
  maxBufferedBytes?: number;
}

/** Where the console's live updates are served. */
export const LIVE_PATH = "/v1/live";

/** One server-sent event: its name and one line of JSON (JSON escapes every newline). */
export function sseFrame(event: LiveEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`;
}

/**
 * GET /v1/live: server-sent events of fleet, node-health and heal-journal changes as they
 * happen. Authenticated like every API route (the Authorization header, read by the page with
 * fetch, so the token never appears in a URL or an access log); a viewer token is enough.
 */
export const liveRoutes: FastifyPluginAsync<LiveRoutesOptions> = async (app, options) => {
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const maxBuffered = options.maxBufferedBytes ?? 1024 * 1024;
  // Open streams never go idle, so the server's close would wait for them: end them first.
  const streams = new Set<() => void>();
  app.addHook("preClose", (done) => {
    for (const end of [...streams]) end();
    done();
  });

  app.get(
    LIVE_PATH,
    {
      schema: {
        tags: ["status"],
        summary:
          "Server-sent events: snapshot, dataplane, verdict, health, heal and breaker changes as they happen",
        produces: ["text/event-stream"],
      },
    },
    (request, reply) => {
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        connection: "keep-alive",
        // Tells nginx-like proxies in front not to hold events back in their buffers.
        "x-accel-buffering": "no",
      });
      let open = true;
      const close = (why: string | undefined): void => {
        if (!open) return;
        open = false;
        streams.delete(end);
        unsubscribe();
        clearInterval(heartbeat);
        if (why !== undefined) request.log.warn({ buffered: raw.writableLength }, why);
        // destroy, not end: end would wait for the very queue the client does not read.
        raw.destroy();
      };
      const send = (text: string): void => {
        if (!open) return;
        if (raw.writableLength > maxBuffered) {
          close("console live client dropped: it reads slower than events come");
          return;
        }
        raw.write(text);
      };
      const unsubscribe = options.feed.subscribe((event) => send(sseFrame(event)));
      const end = (): void => close(undefined);
      streams.add(end);
      const heartbeat = setInterval(() => send(": heartbeat\n\n"), heartbeatMs);
      heartbeat.unref();
      raw.on("close", end);
      // The first bytes tell the page the stream is open, before any change happens.
      send("retry: 2000\n: connected\n\n");
    },
  );
};
