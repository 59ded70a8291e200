import { closeSync, openSync } from "node:fs";
import { ConfigError } from "@clawgate/runtime";
import pino from "pino";
import { accessLogSampler } from "./access-log-sample.js";

/** Where access-log lines go: the `accessLog` setting, already parsed. */
export type AccessLogTarget = { kind: "off" } | { kind: "stdout" } | { kind: "file"; path: string };

/** `stdout` (default), `off`, or anything else: a file path, appended to. */
export function accessLogTarget(setting: string): AccessLogTarget {
  if (setting === "off") return { kind: "off" };
  if (setting === "stdout") return { kind: "stdout" };
  return { kind: "file", path: setting };
}

/** The access log is written in batches of this many bytes, or... */
const BATCH_BYTES = 32 * 1024;
/** ...what is there this long after the first line of a batch, when traffic is light. */
const FLUSH_AFTER_MS = 1_000;

/** The access log's writer: one JSON line per request, buffered, never blocking the proxy. */
export interface AccessLogSink {
  /** Appends `line` as one JSON line; dropped once the sink is closing. */
  write(line: object): void;
  /** Whether a request that ended so gets its line (`accessLogSample`; errors always do). */
  keeps(status: number, failed: boolean): boolean;
  /** Opens the file again (after logrotate moved it away); a no-op on stdout. */
  reopen(): void;
  /** Writes out what is buffered and closes the file. */
  close(): Promise<void>;
}

/**
 * The sink for a target, or undefined when the log is off (then the pipeline has no access-log
 * stage at all, so `off` costs nothing). The destination is sonic-boom with sync:false: lines
 * are copied into a buffer and written in batches, so a slow disk or a full pipe delays the
 * log, not the request. A file that cannot be opened fails the boot with exit 2, naming the
 * setting, rather than a process that serves on and logs nothing.
 */
export function createAccessLogSink(
  target: AccessLogTarget,
  onError: (error: Error) => void,
  sample = 1,
): AccessLogSink | undefined {
  if (target.kind === "off") return undefined;
  if (target.kind === "file") {
    try {
      closeSync(openSync(target.path, "a"));
    } catch (error) {
      throw new ConfigError([
        {
          field: "accessLog",
          value: target.path,
          layer: "settings",
          reason: `cannot open the file for appending (${(error as { code?: string }).code ?? String(error)})`,
        },
      ]);
    }
  }
  const destination = pino.destination({
    dest: target.kind === "file" ? target.path : 1,
    // Lines go out in batches (nginx's access_log buffer=): each write hands the batch to a
    // thread of libuv's pool and wakes the loop when done, and that hop, not the bytes, is the
    // cost; written as soon as the last write finished, the lines of 50 busy connections went
    // about a dozen at a time and the log cost about 30 us of CPU per request. A quiet proxy's
    // lines wait at most FLUSH_AFTER_MS for their batch to fill (nginx's flush=).
    minLength: BATCH_BYTES,
    maxWrite: 2 * BATCH_BYTES,
    sync: false,
    // Buffers, not strings: in string mode sonic-boom appends each line to the pending batch
    // string and measures it (Buffer.byteLength flattens it), copying the whole batch on the
    // JS heap for every line, about 6 KiB per request under load. Buffers are joined once,
    // off the heap, when the batch is written.
    contentMode: "buffer",
  });
  // An 'error' event nobody listens to would end the process: a full disk costs log lines only.
  destination.on("error", onError);
  let closing: Promise<void> | undefined;
  // One timer at a time, armed by the first line after a flush: never one per line.
  let flushTimer: NodeJS.Timeout | undefined;
  const flush = () => {
    flushTimer = undefined;
    if (closing === undefined) destination.flush();
  };
  // sonic-boom's types only know its string mode; in buffer mode its write takes Buffers.
  const lines = destination as unknown as LineStream;
  const batched: LineStream = {
    write(chunk) {
      lines.write(chunk);
      if (flushTimer === undefined) flushTimer = setTimeout(flush, FLUSH_AFTER_MS).unref();
    },
  };
  const sink: StreamSink = accessLogSinkOn(batched, {
    reopen: () => {
      if (target.kind === "file" && closing === undefined) destination.reopen();
    },
    // Once: stop() may run twice (a failed boot, then the signal). A request still finishing
    // after it logs nothing rather than writing to a destroyed stream, which throws.
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        sink.closing = true;
        clearTimeout(flushTimer);
        destination.once("close", () => resolve());
        destination.end();
      });
      return closing;
    },
    sample,
  });
  return sink;
}

/** A stream an access log can write to: a file's or stdout's sonic-boom, or a test's stream. */
export interface LineStream {
  write(chunk: Buffer): unknown;
}

interface StreamSink extends AccessLogSink {
  closing: boolean;
}

const NEWLINE = 0x0a;

/**
 * A sink writing to any stream (tests read the lines back from one). The line is serialized by
 * JSON.stringify alone (pino's per-line work, its level and time formatters and its string
 * building, cost about 3 KiB per request): the caller puts `log` and `time` first in it.
 */
export function accessLogSinkOn(
  stream: LineStream,
  control: {
    reopen?: () => void;
    close?: () => Promise<void>;
    /** accessLogSample: the share of successful requests logged; default 1 (all). */
    sample?: number;
    random?: () => number;
  } = {},
): StreamSink {
  const sink: StreamSink = {
    closing: false,
    keeps: accessLogSampler(control.sample ?? 1, control.random),
    write(line) {
      if (sink.closing) return;
      // One chunk per line, so a line never straddles two writes (on stdout the operational
      // log could land between them), and sized up front, so the line is not copied on the
      // heap again to append its newline.
      const json = JSON.stringify(line);
      const length = Buffer.byteLength(json);
      const chunk = Buffer.allocUnsafe(length + 1);
      chunk.write(json, 0, length);
      chunk[length] = NEWLINE;
      stream.write(chunk);
    },
    reopen: control.reopen ?? (() => {}),
    close: control.close ?? (async () => {}),
  };
  return sink;
}
