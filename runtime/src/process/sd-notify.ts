import { createRequire } from "node:module";

/** The part of a unix-dgram socket the notifier uses. */
export interface DatagramSocket {
  send(
    buf: Buffer,
    offset: number,
    length: number,
    path: string,
    callback?: (err?: Error) => void,
  ): void;
  on(event: "error", listener: (err: Error) => void): unknown;
  close(): void;
}

export type NotifierLogger = {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
};

export interface NotifierOptions {
  /** Environment to read NOTIFY_SOCKET from; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  logger: NotifierLogger;
  /** Opens a unix datagram socket; default unix-dgram, loaded only when NOTIFY_SOCKET is set. */
  openSocket?: () => DatagramSocket;
}

/** Tells the service manager (systemd Type=notify) what the process is doing. */
export interface Notifier {
  /** True when NOTIFY_SOCKET is set and a socket could be opened. */
  readonly enabled: boolean;
  /** READY=1, sent once: listeners are bound and the process can serve. */
  ready(): void;
  /** STATUS=<text>, shown by `systemctl status`; repeats of the same text are dropped. */
  status(text: string): void;
  /** STOPPING=1: the process has begun a graceful stop. */
  stopping(): void;
  /** WATCHDOG=1: the self-check passed; systemd restarts the unit when these stop. */
  watchdog(): void;
  close(): void;
}

const require = createRequire(import.meta.url);

function openUnixDgram(): DatagramSocket {
  // Loaded lazily: a native module that failed to build must not stop a process that is not
  // run by systemd at all.
  const unix = require("unix-dgram") as { createSocket(type: "unix_dgram"): DatagramSocket };
  return unix.createSocket("unix_dgram");
}

/**
 * A notifier for NOTIFY_SOCKET, or a silent one when it is unset. Never throws: a process that
 * cannot reach systemd logs one error and keeps serving (systemd then reports the start as
 * timed out, which an operator sees; a crash loop would hide the cause).
 */
export function createNotifier(options: NotifierOptions): Notifier {
  const env = options.env ?? process.env;
  const target = env.NOTIFY_SOCKET;
  if (target === undefined || target === "") return silentNotifier();
  const { logger } = options;
  if (target.startsWith("@")) {
    // unix-dgram copies the path with strncpy and passes sizeof(sockaddr_un), so it cannot
    // address an abstract socket (leading NUL, exact length).
    logger.error(
      { notifySocket: target },
      "cannot talk to systemd: NOTIFY_SOCKET is an abstract socket, which this build cannot address; READY=1 and WATCHDOG=1 will not be sent",
    );
    return silentNotifier();
  }
  let socket: DatagramSocket;
  try {
    socket = (options.openSocket ?? openUnixDgram)();
  } catch (err) {
    logger.error(
      { notifySocket: target, err: err instanceof Error ? err.message : String(err) },
      "cannot talk to systemd: the unix-dgram module failed to load; READY=1 and WATCHDOG=1 will not be sent",
    );
    return silentNotifier();
  }
  let reportedSendError = false;
  socket.on("error", () => {});
  const send = (text: string) => {
    const buf = Buffer.from(text);
    try {
      socket.send(buf, 0, buf.length, target, (err) => {
        if (err && !reportedSendError) {
          reportedSendError = true;
          logger.warn({ notifySocket: target, err: err.message }, "sd_notify send failed");
        }
      });
    } catch (err) {
      if (!reportedSendError) {
        reportedSendError = true;
        logger.warn(
          { notifySocket: target, err: err instanceof Error ? err.message : String(err) },
          "sd_notify send failed",
        );
      }
    }
  };
  let readySent = false;
  let lastStatus: string | undefined;
  let closed = false;
  return {
    enabled: true,
    ready() {
      if (readySent || closed) return;
      readySent = true;
      send("READY=1");
    },
    status(text) {
      if (closed || text === lastStatus) return;
      lastStatus = text;
      // One line per datagram field; a newline inside would start a new (bogus) assignment.
      send(`STATUS=${text.replace(/\n/g, " ")}`);
    },
    stopping() {
      if (!closed) send("STOPPING=1");
    },
    watchdog() {
      if (!closed) send("WATCHDOG=1");
    },
    close() {
      if (closed) return;
      closed = true;
      try {
        socket.close();
      } catch {
        // Already closed by the OS; nothing left to release.
      }
    },
  };
}

function silentNotifier(): Notifier {
  const noop = () => {};
  return { enabled: false, ready: noop, status: noop, stopping: noop, watchdog: noop, close: noop };
}
