import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@clawgate/runtime";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { resolveAdminToken } from "./admin-token.js";
import { loadControlPlaneSettings } from "./load-settings.js";

const logger = pino({ level: "silent" });
const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function tokenFile(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "clawgate-token-"));
  dirs.push(dir);
  return join(dir, "nested", "admin-token");
}

describe("resolveAdminToken", () => {
  it("prefers the configured token and never touches the file", async () => {
    const path = await tokenFile();
    const token = await resolveAdminToken(
      { adminToken: "configured", adminTokenFile: path },
      logger,
    );
    expect(token).toBe("configured");
    await expect(stat(path)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("generates a token into a missing file (mode 0600) and reads it back next time", async () => {
    const path = await tokenFile();
    const token = await resolveAdminToken({ adminTokenFile: path }, logger);
    expect(token.length).toBeGreaterThanOrEqual(16);
    expect(await readFile(path, "utf8")).toBe(`${token}\n`);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await resolveAdminToken({ adminTokenFile: path }, logger)).toBe(token);
  });

  it.each([
    ["short", "too-short\n"],
    ["empty", ""],
  ])(
    "refuses a %s token file with a ConfigError naming adminTokenFile, leaving it as is",
    async (_, content) => {
      const path = await tokenFile();
      await resolveAdminToken({ adminTokenFile: path }, logger);
      await writeFile(path, content);
      const failure = resolveAdminToken({ adminTokenFile: path }, logger);
      await expect(failure).rejects.toBeInstanceOf(ConfigError);
      await expect(failure).rejects.toThrow(
        /adminTokenFile = ".*" \(from settings\): holds \d+ characters, fewer than 16/,
      );
      expect(await readFile(path, "utf8")).toBe(content);
    },
  );

  it("names the layer the token file's path came from", async () => {
    const path = await tokenFile();
    await resolveAdminToken({ adminTokenFile: path }, logger);
    await writeFile(path, "short\n");
    const settings = loadControlPlaneSettings(["--admin-token-file", path], {});
    await expect(resolveAdminToken(settings, logger)).rejects.toThrow(
      `adminTokenFile = "${path}" (from flag --admin-token-file): holds 5 characters`,
    );
  });
});
