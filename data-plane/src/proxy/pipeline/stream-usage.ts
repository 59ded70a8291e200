import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { includeUsageAtEnd } from "../../quota/include-usage-at-end.js";
import { refuseWideJson } from "../../quota/refuse-wide-json.js";
import { injectStreamUsage } from "../../quota/stream-usage-request.js";
import { UsageChunkFilter } from "../../quota/usage-chunk-filter.js";
import { wideJsonBody } from "../../quota/wide-json-sniff.js";
import type { Exchange, ExchangeBody } from "./exchange.js";
import { DecoratorHandler, guarded, type Interceptor, type StageController } from "./stage.js";
import { streamedBody } from "./streamed-body.js";

/**
 * Route usage.injectStreamUsage, request side: after the request-body stage read a small
 * body whole (proxy-handler.ts decides which: declared within the limit, or of unknown length
 * and ended within it), a streaming OpenAI-style request gets stream_options.include_usage, so
 * its stream reports the usage the token budget debits. The forwarded Content-Length follows
 * the new body; a body that came without one gets one from undici, which frames a buffer by its
 * length. A JSON object in UTF-16 or UTF-32, which the gateway cannot read and a Python upstream
 * can (wide-json-sniff.ts), is answered with 415. Anything else passes as it came.
 */
export function streamUsageRequest(): Interceptor {
  return (next) => (exchange, handler) => {
    if (exchange.route.injectStreamUsage && Buffer.isBuffer(exchange.body)) {
      if (wideJsonBody(exchange.body) === "refuse") {
        handler.onFailure({ kind: "rejected", code: "CLAWGATE_UNSUPPORTED_MEDIA_TYPE" });
        return;
      }
      const requested = injectStreamUsage(exchange.body);
      if (requested !== undefined) {
        exchange.clientBodyBytes = exchange.body.length;
        exchange.stripStreamUsage = requested.stripUsage;
        exchange.body = requested.body;
        setContentLength(exchange.headers, requested.body.length);
      }
    }
    next(exchange, handler);
  };
}

/**
 * A body too large to read whole on an injectStreamUsage route (declared over
 * STREAM_USAGE_BODY_LIMIT, or of unknown length and grown past it): it streams upstream as it
 * comes, its first bytes sniffed (refuse-wide-json.ts) and the rest scanned, and include_usage
 * is added at its end (include-usage-at-end.ts), which sets exchange.clientBodyBytes and
 * stripStreamUsage when it does. Added bytes change its length, so it goes without
 * Content-Length: undici frames an iterable body of unknown length chunked.
 */
export function scannedForUsage(
  exchange: Exchange,
  source: IncomingMessage | AsyncGenerator<Uint8Array>,
  replayLimitBytes: number | undefined,
): ExchangeBody {
  removeContentLength(exchange.headers);
  return streamedBody(refuseWideJson(source), exchange.route, replayLimitBytes, (body) =>
    includeUsageAtEnd(body, exchange),
  );
}

/**
 * Response side: the usage chunk the client did not ask for is kept from its stream. It stands
 * above the policy chain, so the token budget reads the whole stream, usage chunk included,
 * before the chunk is dropped on the way to the client.
 */
export function streamUsageResponse(): Interceptor {
  return (next) => (exchange, handler) => {
    if (!exchange.route.injectStreamUsage) next(exchange, handler);
    else guarded(next, exchange, new StreamUsageHandler(handler, exchange));
  };
}

class StreamUsageHandler extends DecoratorHandler {
  #filter: UsageChunkFilter | undefined;

  constructor(
    handler: StreamUsageHandler["handler"],
    private readonly exchange: Exchange,
  ) {
    super(handler);
  }

  override onResponseStart(
    controller: StageController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    // Set by the request side, which ran before any response came.
    if (
      this.exchange.stripStreamUsage &&
      /^text\/event-stream/i.test(headers["content-type"] ?? "")
    ) {
      this.#filter = new UsageChunkFilter();
      // The client gets fewer bytes than the upstream declared.
      delete headers["content-length"];
    }
    this.handler.onResponseStart(controller, status, headers);
  }

  override onResponseData(controller: StageController, chunk: Buffer): void {
    const filter = this.#filter;
    if (filter === undefined) {
      this.handler.onResponseData(controller, chunk);
      return;
    }
    const passed = filter.push(chunk);
    if (passed.length > 0) this.handler.onResponseData(controller, passed);
  }

  override onResponseEnd(controller: StageController): void {
    const rest = this.#filter?.end();
    if (rest !== undefined && rest.length > 0) this.handler.onResponseData(controller, rest);
    this.handler.onResponseEnd(controller);
  }
}

/** Replaces the value of content-length in a flat [name, value, ...] header list. */
function setContentLength(headers: string[], length: number): void {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]?.toLowerCase() === "content-length") headers[i + 1] = String(length);
  }
}

/** Removes content-length from a flat [name, value, ...] header list. */
function removeContentLength(headers: string[]): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    if (headers[i]?.toLowerCase() === "content-length") headers.splice(i, 2);
  }
}
