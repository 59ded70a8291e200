import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { ControlPlaneSettings } from "./settings.js";

/**
 * The admin API always has a token: the one configured, else the one in the token file,
 * else a new random one written to that file (mode 0600) for clawctl to read. The token
 * itself is never logged; only the file it lives in.
 */
export async function resolveAdminToken(
  settings: Pick<ControlPlaneSettings, "adminToken" | "adminTokenFile">,
  logger: Logger,
): Promise<string> {
  if (settings.adminToken !== undefined) return settings.adminToken;
  const path = settings.adminTokenFile;
  try {
    const stored = (await readFile(path, "utf8")).trim();
    if (stored.length >= 16) {
      logger.info({ file: path }, "admin token read from file");
      return stored;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const token = randomBytes(24).toString("base64url");
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${token}\n`, { mode: 0o600 });
  logger.info({ file: path }, "admin token generated and written to file");
  return token;
}
