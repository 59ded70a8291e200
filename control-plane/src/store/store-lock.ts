import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { hostname as osHostname } from "node:os";
import { dirname } from "node:path";

/** Who holds a store file, as written in its lock file. */
export interface LockHolder {
  pid: number;
  hostname: string;
  /** ISO time the holder took the lock. */
  startedAt: string;
}

export interface StoreLock {
  /** The lock file, next to the store: `{store}.lock`. */
  readonly path: string;
  /** Removes the lock file if it is still ours; safe to call twice. */
  release(): void;
}

export interface LockStoreFileOptions {
  /** Told when a stale lock (its PID dead on this host) is taken over; default silent. */
  onTakeover?: (stale: LockHolder, lockPath: string) => void;
  /** Defaults: this process's PID and the host's name; tests pass others. */
  pid?: number;
  hostname?: string;
}

/** Lock files this process holds, to tell "ours, still held" from "our PID, a previous life". */
const heldHere = new Set<string>();

/** Two stale-lock takeovers in a row mean another process is racing us for it. */
const MAX_ACQUIRE_ATTEMPTS = 3;

function lockError(code: string, message: string): Error & { code: string } {
  return Object.assign(new Error(message), { code });
}

/**
 * Takes the embedded store's file for this process alone. The embedded store keeps its state in
 * memory and rewrites the whole file on each commit, so a second process on the same file would
 * report success and then overwrite the first one's writes (and the reverse). The lock is a file
 * created with O_EXCL holding PID, host and start time: no native module, and the holder is named
 * in the refusal. A lock left by a process that died (SIGKILL, power loss) is taken over when its
 * PID is dead on this host; a holder on another host cannot be checked, so it is never taken over.
 */
export async function lockStoreFile(
  storePath: string,
  options: LockStoreFileOptions = {},
): Promise<StoreLock> {
  const path = `${storePath}.lock`;
  const self: LockHolder = {
    pid: options.pid ?? process.pid,
    hostname: options.hostname ?? osHostname(),
    startedAt: new Date().toISOString(),
  };
  const content = `${JSON.stringify(self)}\n`;
  await mkdir(dirname(path), { recursive: true });

  for (let attempt = 1; attempt <= MAX_ACQUIRE_ATTEMPTS; attempt++) {
    if (tryCreate(path, content)) return holdLock(path, content);
    const holder = readHolder(path);
    if (holder === undefined) continue; // Released between our create and our read: try again.
    if (holder === "unreadable") {
      throw lockError(
        "CLAWGATE_STORE_LOCKED",
        `embedded store ${storePath} is locked by ${path}, which does not name its holder; if no control plane uses the store, delete ${path}`,
      );
    }
    if (holder.hostname !== self.hostname || !isGone(holder, self, path)) {
      throw lockError(
        "CLAWGATE_STORE_LOCKED",
        `embedded store ${storePath} is in use by another control plane (pid ${holder.pid} on host ${holder.hostname}, since ${holder.startedAt}; lock file ${path}); stop it, or give this one its own storePath or etcdEndpoints`,
      );
    }
    options.onTakeover?.(holder, path);
    removeIfUnchanged(path, holder);
  }
  throw lockError(
    "CLAWGATE_STORE_LOCKED",
    `embedded store ${storePath}: could not take its lock ${path}; another process keeps taking it`,
  );
}

/** True when we created the lock file; false when one exists already. */
function tryCreate(path: string, content: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o644);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
  try {
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
  return true;
}

function readHolder(path: string): LockHolder | "unreadable" | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockHolder>;
    if (Number.isInteger(parsed.pid) && typeof parsed.hostname === "string") {
      return {
        pid: parsed.pid as number,
        hostname: parsed.hostname,
        startedAt: String(parsed.startedAt),
      };
    }
  } catch {
    // Falls through: a lock we cannot read is never taken over.
  }
  return "unreadable";
}

/**
 * A holder on this host is gone when its PID is dead, or when it is our own PID and this process
 * does not hold the lock: a container restarted with the same PID (often 1) and host name.
 */
function isGone(holder: LockHolder, self: LockHolder, path: string): boolean {
  if (holder.pid === self.pid) return !heldHere.has(path);
  return !isAlive(holder.pid);
}

/** Signal 0 checks existence only; EPERM means alive but someone else's. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Deletes a stale lock only if it still names the dead holder, so a process that took it over a
 * moment before us keeps its fresh lock (the window between read and unlink remains, but two
 * control planes starting within microseconds on one dead lock is not worth a native flock).
 */
function removeIfUnchanged(path: string, stale: LockHolder): void {
  const now = readHolder(path);
  if (typeof now !== "object" || now.pid !== stale.pid || now.startedAt !== stale.startedAt) return;
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

function holdLock(path: string, content: string): StoreLock {
  let held = true;
  heldHere.add(path);
  const release = () => {
    if (!held) return;
    held = false;
    heldHere.delete(path);
    process.removeListener("exit", release);
    try {
      // Only our own lock: never delete one another process took over after we lost it.
      if (readFileSync(path, "utf8") === content) unlinkSync(path);
    } catch {
      // Already gone; nothing to release.
    }
  };
  // An exit without close() (an uncaught error, process.exit) still frees the store; SIGKILL
  // cannot be caught, and the next start takes that lock over because our PID is dead.
  process.on("exit", release);
  return { path, release };
}
