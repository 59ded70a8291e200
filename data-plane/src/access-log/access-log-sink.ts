import { closeSync, openSync } from "node:fs";
import { ConfigError } from "@clawgate/runtime";
import pino, { type DestinationStream, type Logger } from "pino";
import { accessLogSampler } from "./access-log-sample.js";

/** Where access-log lines go: the `accessLog` setting, already parsed. */
export type AccessLogTarget = { kind: "off" } | { kind: "stdout" } | { kind: "file"; path: string };

/** `stdout` (default), `off`, or anything else: a file path, appended to. */
export function accessLogTarget(setting: string): AccessLogTarget {
  if (setting === "off") return { kind: "off" };
  if (setting === "stdout") return { kind: "stdout" };
  return { kind: "file", path: setting };
}

/** The access log's writer: one JSON line per request, buffered, never blocking the proxy. */
export interface AccessLogSink {
  readonly logger: Logger;
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
    // No minLength: a quiet proxy's lines must not sit in a buffer; under load the lines
    // written while one write is in flight still go out together in the next.
    sync: false,
  });
  // An 'error' event nobody listens to would end the process: a full disk costs log lines only.
  destination.on("error", onError);
  let closing: Promise<void> | undefined;
  const sink = accessLogSinkOn(destination, {
    reopen: () => {
      if (target.kind === "file" && closing === undefined) destination.reopen();
    },
    // Once: stop() may run twice (a failed boot, then the signal). A request still finishing
    // after it logs nothing rather than writing to a destroyed stream, which throws.
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        sink.logger.level = "silent";
        destination.once("close", () => resolve());
        destination.end();
      });
      return closing;
    },
    sample,
  });
  return sink;
}

/** A sink writing to any stream (tests read the lines back from one). */
export function accessLogSinkOn(
  stream: DestinationStream,
  control: {
    reopen?: () => void;
    close?: () => Promise<void>;
    /** accessLogSample: the share of successful requests logged; default 1 (all). */
    sample?: number;
    random?: () => number;
  } = {},
): AccessLogSink {
  const logger = pino(
    {
      // No pid, hostname or level per line, the time as ISO 8601, as access logs read. In place
      // of the level, `log: "access"` tells these lines from the operational log on stdout.
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: () => ({ log: "access" }) },
    },
    stream,
  );
  return {
    logger,
    keeps: accessLogSampler(control.sample ?? 1, control.random),
    reopen: control.reopen ?? (() => {}),
    close: control.close ?? (async () => {}),
  };
}
