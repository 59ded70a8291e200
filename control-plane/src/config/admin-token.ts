import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { type ConfigError, settingError } from "@clawgate/runtime";
import type { Logger } from "pino";
import type { ControlPlaneSettings } from "./settings.js";

/** Shortest token the file may hold; shorter is too easy to guess. */
const MIN_TOKEN_LENGTH = 16;

/**
 * The admin API always has a token: the one configured, else the one in the token file,
 * else (only when there is no such file) a new random one written to it (mode 0600) for
 * clawctl to read. A file that exists but cannot serve is a ConfigError, never overwritten:
 * replacing it would silently lock out every client holding the operator's token. The token
 * itself is never logged; only the file it lives in.
 */
export async function resolveAdminToken(
  settings: Pick<ControlPlaneSettings, "adminToken" | "adminTokenFile">,
  logger: Logger,
): Promise<string> {
  if (settings.adminToken !== undefined) return settings.adminToken;
  const path = settings.adminTokenFile;
  let stored: string | undefined;
  try {
    stored = (await readFile(path, "utf8")).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
      throw invalid(settings, path, `cannot be read: ${(error as Error).message}`);
    }
  }
  if (stored !== undefined) {
    if (stored.length < MIN_TOKEN_LENGTH) {
      throw invalid(
        settings,
        path,
        `holds ${stored.length} characters, fewer than ${MIN_TOKEN_LENGTH}; put a longer token in it or delete it to have one generated`,
      );
    }
    logger.info({ file: path }, "admin token read from file");
    return stored;
  }
  const token = randomBytes(24).toString("base64url");
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${token}\n`, { mode: 0o600, flag: "wx" });
  logger.info({ file: path }, "admin token generated and written to file");
  return token;
}

function invalid(settings: object, path: string, reason: string): ConfigError {
  return settingError(settings, "adminTokenFile", path, reason);
}
