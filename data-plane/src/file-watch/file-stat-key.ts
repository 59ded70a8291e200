import { type Stats, statSync } from "node:fs";

/**
 * A file's identity as read: inode, modification time and size. A renewal renamed over the
 * file changes the inode; one rewritten in place changes the mtime (and usually the size).
 */
export function fileStatKey(stat: Stats): string {
  return `${stat.ino}/${stat.mtimeMs}/${stat.size}`;
}

/** The file's stat key now; undefined when it is missing (mid-rename, deleted) or unreadable. */
export function currentFileStatKey(path: string): string | undefined {
  try {
    const stat = statSync(path);
    return stat.nlink === 0 ? undefined : fileStatKey(stat);
  } catch {
    return undefined;
  }
}
