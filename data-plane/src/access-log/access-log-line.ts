import type { FailureKind } from "../errors/failure-kind.js";
import { type JsonLineWriter, worstStringBytes } from "./json-line-writer.js";
import type { LogTime } from "./log-time.js";

/**
 * The fields of one access-log line, in the order they are written. Only these fields exist:
 * no header is ever copied (Authorization, Cookie, x-api-key stay out), and `path` comes
 * without its query string, which may carry tokens. An undefined field is left out of the
 * line, as JSON.stringify would.
 */
export interface AccessLogLine {
  requestId: string;
  /** The client's address as the socket sees it (a load balancer's, behind one). */
  client: string | undefined;
  method: string | undefined;
  host: string | undefined;
  path: string;
  route: string | undefined;
  upstream: string | undefined;
  /** The node of the last attempt. */
  node: string | undefined;
  status: number;
  attempts: number;
  /** Request body bytes; undefined for a chunked body streamed through once (never counted). */
  bytesIn: number | undefined;
  /** Response body bytes written to the client. */
  bytesOut: number;
  /** Time until the client got the status line, in ms; written to 0.01. */
  headersMs: number;
  /** In ms; written to 0.01. */
  durationMs: number;
  failure: FailureKind | undefined;
  /** A stale copy was served. */
  stale: boolean;
}

/** Every field of `line` back to its empty value, for the next request to fill. */
export function resetAccessLogLine(line: AccessLogLine): void {
  line.requestId = "";
  line.client = undefined;
  line.method = undefined;
  line.host = undefined;
  line.path = "";
  line.route = undefined;
  line.upstream = undefined;
  line.node = undefined;
  line.status = 0;
  line.attempts = 0;
  line.bytesIn = 0;
  line.bytesOut = 0;
  line.headersMs = 0;
  line.durationMs = 0;
  line.failure = undefined;
  line.stale = false;
}

/** A line with every field at its empty value, to be filled by the caller. */
export function emptyAccessLogLine(): AccessLogLine {
  return {
    requestId: "",
    client: undefined,
    method: undefined,
    host: undefined,
    path: "",
    route: undefined,
    upstream: undefined,
    node: undefined,
    status: 0,
    attempts: 0,
    bytesIn: 0,
    bytesOut: 0,
    headersMs: 0,
    durationMs: 0,
    failure: undefined,
    stale: false,
  };
}

/** Keys, punctuation, the time and six numbers of at most 24 characters: under this. */
const FIXED_BYTES = 512;

/** The most bytes `writeAccessLogLine` can write for `line`, to reserve room for it. */
export function worstAccessLogLineBytes(line: AccessLogLine): number {
  return (
    FIXED_BYTES +
    worstStringBytes(
      line.requestId.length +
        (line.client?.length ?? 0) +
        (line.method?.length ?? 0) +
        (line.host?.length ?? 0) +
        line.path.length +
        (line.route?.length ?? 0) +
        (line.upstream?.length ?? 0) +
        (line.node?.length ?? 0) +
        (line.failure?.length ?? 0),
    ) +
    // worstStringBytes counts two quotes once; each of the nine strings has its own.
    16
  );
}

/**
 * Writes `line` as one JSON line (newline included), at `epochMs` (Date.now()), into `out`,
 * which has room for worstAccessLogLineBytes(line). A fixed field order written straight into
 * the batch buffer instead of JSON.stringify over an object and a Buffer per line: the keys are
 * constants, numbers are written digit by digit, and a string is escaped only when it holds a
 * character JSON must escape. The output is what JSON.stringify would write for the same
 * fields (undefined ones left out; the two durations rounded to 0.01 ms). `log` and `time` come
 * first, so a reader of stdout tells access lines from the operational log by their first bytes.
 */
export function writeAccessLogLine(
  out: JsonLineWriter,
  line: AccessLogLine,
  time: LogTime,
  epochMs: number,
): void {
  const second = Math.floor(epochMs / 1000);
  out.ascii('{"log":"access","time":"');
  out.ascii(time.prefix(second));
  out.padded(epochMs - second * 1000, 3);
  out.ascii('Z","requestId":');
  out.string(line.requestId);
  if (line.client !== undefined) {
    out.ascii(',"client":');
    out.string(line.client);
  }
  if (line.method !== undefined) {
    out.ascii(',"method":');
    out.string(line.method);
  }
  if (line.host !== undefined) {
    out.ascii(',"host":');
    out.string(line.host);
  }
  out.ascii(',"path":');
  out.string(line.path);
  if (line.route !== undefined) {
    out.ascii(',"route":');
    out.string(line.route);
  }
  if (line.upstream !== undefined) {
    out.ascii(',"upstream":');
    out.string(line.upstream);
  }
  if (line.node !== undefined) {
    out.ascii(',"node":');
    out.string(line.node);
  }
  out.ascii(',"status":');
  out.number(line.status);
  out.ascii(',"attempts":');
  out.number(line.attempts);
  if (line.bytesIn !== undefined) {
    out.ascii(',"bytesIn":');
    out.number(line.bytesIn);
  }
  out.ascii(',"bytesOut":');
  out.number(line.bytesOut);
  out.ascii(',"headersMs":');
  out.hundredths(line.headersMs);
  out.ascii(',"durationMs":');
  out.hundredths(line.durationMs);
  if (line.failure !== undefined) {
    out.ascii(',"failure":');
    out.string(line.failure);
  }
  out.ascii(line.stale ? ',"stale":true}\n' : "}\n");
}
