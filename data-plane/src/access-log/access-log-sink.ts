import { closeSync, openSync, writeSync } from "node:fs";
import { ConfigError } from "@clawgate/runtime";
import pino from "pino";
import {
  type AccessLogLine,
  emptyAccessLogLine,
  resetAccessLogLine,
  worstAccessLogLineBytes,
  writeAccessLogLine,
} from "./access-log-line.js";
import { accessLogSampler } from "./access-log-sample.js";
import { LineBatch } from "./line-batch.js";
import { LogTime } from "./log-time.js";

/**
 * Where access-log lines go: the `accessLog` setting, already parsed. A file keeps the layer
 * the setting came from (`env CLAWGATE_ACCESS_LOG`, ...; default "settings"), which an error
 * opening it names.
 */
export type AccessLogTarget =
  | { kind: "off" }
  | { kind: "stdout" }
  | { kind: "file"; path: string; origin?: string };

/** `stdout` (default), `off`, or anything else: a file path, appended to. */
export function accessLogTarget(setting: string, origin?: string): AccessLogTarget {
  if (setting === "off") return { kind: "off" };
  if (setting === "stdout") return { kind: "stdout" };
  return origin === undefined
    ? { kind: "file", path: setting }
    : { kind: "file", path: setting, origin };
}

/**
 * The access log is written in batches of this many bytes, or... Each write costs a hop to
 * libuv's thread pool and back, far more than its bytes: side by side under load (bench:ab,
 * GET), 64 KiB batches took about 2-3 % less CPU per request than 32 KiB ones, close to all
 * the writes cost (a sink that wrote nothing took 3-4 % less).
 */
const BATCH_BYTES = 64 * 1024;
/** ...what is there this long after the first line of a batch, when traffic is light. */
const FLUSH_AFTER_MS = 1_000;

/** The access log's writer: one JSON line per request, buffered, never blocking the proxy. */
export interface AccessLogSink {
  /**
   * The line to fill for the request ending now, every field reset. It is one record reused
   * for every line, so logging allocates no object per request: fill it and `write` it at
   * once, synchronously, and never keep it.
   */
  line(): AccessLogLine;
  /** Appends `line` as one JSON line; dropped once the sink is closing. */
  write(line: AccessLogLine): void;
  /** Whether a request that ended so gets its line (`accessLogSample`; errors always do). */
  keeps(status: number, failed: boolean): boolean;
  /** Opens the file again (after logrotate moved it away); a no-op on stdout. */
  reopen(): void;
  /** Writes out what is buffered and closes the file. */
  close(): Promise<void>;
  /**
   * Writes out what is buffered before it returns, synchronously: for the process's exit,
   * which leaves no turn for an asynchronous write (a second SIGTERM while draining, the stop
   * deadline, a fatal error). Lines written after it are batched again as usual.
   */
  flushSync(): void;
}

/**
 * The sink for a target, or undefined when the log is off (then the pipeline has no access-log
 * stage at all, so `off` costs nothing). The destination is sonic-boom with sync:false, fed
 * whole batches: a slow disk or a full pipe delays the log, not the request. A file that
 * cannot be opened fails the boot with exit 2, naming the setting, rather than a process that
 * serves on and logs nothing.
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
          layer: target.origin ?? "settings",
          reason: `cannot open the file for appending (${(error as { code?: string }).code ?? String(error)})`,
        },
      ]);
    }
  }
  const destination = pino.destination({
    dest: target.kind === "file" ? target.path : 1,
    // Lines reach it in batches (LineBatch, nginx's access_log buffer=): each write hands the
    // batch to a thread of libuv's pool and wakes the loop when done, and that hop, not the
    // bytes, is the cost; written line by line as soon as the last write finished, the lines
    // of 50 busy connections went about a dozen at a time and the log cost about 30 us of CPU
    // per request. Batches that queue behind a slow write are joined up to maxWrite.
    maxWrite: 2 * BATCH_BYTES,
    sync: false,
    // Buffers, not strings: in string mode sonic-boom appends each chunk to the pending
    // string and measures it (Buffer.byteLength flattens it), copying it on the JS heap.
    contentMode: "buffer",
  });
  // An 'error' event nobody listens to would end the process: a full disk costs log lines only.
  destination.on("error", onError);
  let closing: Promise<void> | undefined;
  // sonic-boom's types only know its string mode; in buffer mode its write takes Buffers.
  const lines = destination as unknown as LineStream;
  const sink = accessLogSinkOn(lines, {
    reopen: () => {
      if (target.kind === "file" && closing === undefined) destination.reopen();
    },
    // Once: stop() may run twice (a failed boot, then the signal).
    close: () => {
      process.off("exit", onExit);
      closing ??= new Promise<void>((resolve) => {
        destination.once("close", () => resolve());
        destination.end();
      });
      return closing;
    },
    // Not through sonic-boom's write, which would start one more asynchronous write that the
    // exit does not wait for: what it holds first, then the batch, both with writeSync.
    flushSync: (chunk) => {
      try {
        destination.flushSync();
        // sonic-boom's types leave out its fd (-1 until the file is open: writeSync throws).
        const { fd } = destination as unknown as { fd: number };
        if (chunk !== undefined) writeAllSync(fd, chunk);
      } catch {
        // Not open yet (sonic-boom opens the file asynchronously), already closed, or a pipe
        // nobody reads: those lines cannot be written any more.
      }
    },
    sample,
  });
  // process.exit() with lines still in the batch (up to flushAfterMs of them): pino flushes
  // only what sonic-boom holds at exit, and the batch sits in front of it.
  const onExit = () => sink.flushSync();
  process.on("exit", onExit);
  return sink;
}

/** A stream an access log can write to: a file's or stdout's sonic-boom, or a test's stream. */
export interface LineStream {
  write(chunk: Buffer): unknown;
}

/**
 * A sink writing to any stream (tests read the lines back from one): each line written by
 * writeAccessLogLine straight into a LineBatch, handed to the stream when full or
 * `flushAfterMs` after its first line (nginx's flush=), whichever comes first.
 */
export function accessLogSinkOn(
  stream: LineStream,
  control: {
    reopen?: () => void;
    /** Closes the stream, after the sink wrote out what it held. */
    close?: () => Promise<void>;
    /**
     * Writes what the stream holds, then `chunk` (the batch, if any), before returning;
     * default: `chunk` handed to the stream's write.
     */
    flushSync?: (chunk: Buffer | undefined) => void;
    /** accessLogSample: the share of successful requests logged; default 1 (all). */
    sample?: number;
    random?: () => number;
    /** Default 1 s. */
    flushAfterMs?: number;
    /** Default 64 KiB. */
    batchBytes?: number;
  } = {},
): AccessLogSink {
  const flushAfterMs = control.flushAfterMs ?? FLUSH_AFTER_MS;
  const batch = new LineBatch(control.batchBytes ?? BATCH_BYTES, (chunk) => stream.write(chunk));
  const time = new LogTime();
  const scratch = emptyAccessLogLine();
  let closing: Promise<void> | undefined;
  // One timer at a time, armed by the first line of a batch: never one per line.
  let flushTimer: NodeJS.Timeout | undefined;
  const flush = () => {
    flushTimer = undefined;
    batch.flush();
  };
  return {
    keeps: accessLogSampler(control.sample ?? 1, control.random),
    line() {
      resetAccessLogLine(scratch);
      return scratch;
    },
    write(line) {
      // A request still finishing after close() logs nothing rather than writing to a
      // destroyed stream, which throws.
      if (closing !== undefined) return;
      if (batch.empty) flushTimer ??= setTimeout(flush, flushAfterMs).unref();
      writeAccessLogLine(batch.reserve(worstAccessLogLineBytes(line)), line, time, Date.now());
    },
    reopen: control.reopen ?? (() => {}),
    close() {
      closing ??= (async () => {
        clearTimeout(flushTimer);
        flushTimer = undefined;
        batch.flush();
        await control.close?.();
      })();
      return closing;
    },
    flushSync() {
      clearTimeout(flushTimer);
      flushTimer = undefined;
      let pending: Buffer | undefined;
      batch.flush((chunk) => {
        pending = chunk;
      });
      if (control.flushSync !== undefined) control.flushSync(pending);
      else if (pending !== undefined) stream.write(pending);
    },
  };
}

/** Writes all of `chunk` to `fd` before returning (a write may take part of it). */
function writeAllSync(fd: number, chunk: Buffer): void {
  let at = 0;
  while (at < chunk.length) at += writeSync(fd, chunk, at);
}
