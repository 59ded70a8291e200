import type { IncomingHttpHeaders } from "node:http";
import zlib from "node:zlib";
import { type UsageScanner, usageScannerFor } from "./usage-scanner.js";

/**
 * Reads a response's token usage whatever its Content-Encoding, so a compressed answer is
 * never free. The token-budget policy asks upstream for `accept-encoding: identity` on the
 * routes of tenants with a token limit, but an upstream may compress anyway (or a route's
 * requestHeaders may ask for it), so:
 *
 * - gzip, deflate, br: a copy of the bytes is decoded as it passes (node:zlib streaming,
 *   never the whole body) and fed to the usage scanner; the client gets the bytes as sent.
 *   A cut response is decoded as far as it came (sync flush), and debited with what was seen
 *   (a stream without its final usage with an estimate: stream-usage-estimate.ts).
 * - anything else (zstd, a list of codings), data that does not decode, or a copy that
 *   outgrows its bounds (more than MAX_QUEUED_BYTES waiting for the decoder, or more than
 *   MAX_DECODED_BYTES out of it: a decompression bomb) is charged an estimate instead: one
 *   token per byte received, or what the scanner found if more. A token is about 4 bytes of
 *   text and compression shrinks model JSON about 3 to 4 times, so a compressed byte is about
 *   a token; charging it fails closed rather than letting the response go uncounted.
 */
export interface UsageReader {
  push(chunk: Buffer): void;
  /**
   * The response ended or was cut: `done` gets its tokens (at once, or once decoded).
   * `promptTokens`: the request's estimated input, charged by a stream that did not report one.
   */
  finish(promptTokens: number, done: (tokens: number) => void): void;
}

/** Compressed bytes the decoder may fall behind by before the copy is given up. */
const MAX_QUEUED_BYTES = 1024 * 1024;
/** Decoded bytes read before the copy is given up; a model response is far smaller. */
const MAX_DECODED_BYTES = 64 * 1024 * 1024;

/** A reader for the response's head, or undefined when its content type cannot carry usage. */
export function usageReaderFor(headers: IncomingHttpHeaders): UsageReader | undefined {
  const scanner = usageScannerFor(headers["content-type"]);
  if (scanner === undefined) return undefined;
  const encoding = (headers["content-encoding"] ?? "").trim().toLowerCase();
  if (encoding === "" || encoding === "identity") return plainReader(scanner);
  const decoder = decoderFor(encoding);
  return new DecodingReader(scanner, decoder);
}

function plainReader(scanner: UsageScanner): UsageReader {
  return {
    push: (chunk) => scanner.push(chunk),
    finish: (promptTokens, done) => done(scanner.tokens(promptTokens)),
  };
}

type Decoder = zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress;

/** A streaming decoder that ends without error on truncated input; undefined: unknown coding. */
function decoderFor(encoding: string): Decoder | undefined {
  const flush = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  if (encoding === "gzip" || encoding === "x-gzip") return zlib.createGunzip(flush);
  if (encoding === "deflate") return zlib.createInflate(flush);
  if (encoding === "br") {
    return zlib.createBrotliDecompress({ finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH });
  }
  return undefined;
}

class DecodingReader implements UsageReader {
  readonly #scanner: UsageScanner;
  /** Undefined once the copy is given up (or never started): the estimate is charged. */
  #decoder: Decoder | undefined;
  #received = 0;
  #decoded = 0;
  #finished = false;
  #promptTokens = 0;
  #done: ((tokens: number) => void) | undefined;

  constructor(scanner: UsageScanner, decoder: Decoder | undefined) {
    this.#scanner = scanner;
    this.#decoder = decoder;
    decoder?.on("data", (data: Buffer) => {
      this.#decoded += data.length;
      if (this.#decoded > MAX_DECODED_BYTES) this.#giveUp();
      else scanner.push(data);
    });
    decoder?.once("end", () => this.#settle(this.#scanner.tokens(this.#promptTokens)));
    decoder?.once("error", () => this.#giveUp());
  }

  push(chunk: Buffer): void {
    this.#received += chunk.length;
    const decoder = this.#decoder;
    if (decoder === undefined) return;
    if (decoder.writableLength > MAX_QUEUED_BYTES) {
      this.#giveUp();
      return;
    }
    decoder.write(chunk);
  }

  finish(promptTokens: number, done: (tokens: number) => void): void {
    this.#promptTokens = promptTokens;
    this.#done = done;
    if (this.#decoder === undefined) this.#settle(this.#estimate());
    else this.#decoder.end();
  }

  #estimate(): number {
    return Math.max(this.#scanner.tokens(this.#promptTokens), this.#received);
  }

  #giveUp(): void {
    const decoder = this.#decoder;
    if (decoder === undefined) return;
    this.#decoder = undefined;
    decoder.removeAllListeners("data");
    decoder.removeAllListeners("end");
    // An error after destroy must not crash the process.
    decoder.on("error", () => {});
    decoder.destroy();
    if (this.#done !== undefined) this.#settle(this.#estimate());
  }

  #settle(tokens: number): void {
    if (this.#finished || this.#done === undefined) return;
    this.#finished = true;
    this.#done(tokens);
  }
}
