import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expandCommand, templateValues } from "./command-template.js";
import { runCommand } from "./run-command.js";

const RECORDER = fileURLToPath(new URL("./testdata/record-argv.mjs", import.meta.url));

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "clawgate-template-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function recorded(file: string): Promise<Array<{ args: string[]; env: string | null }>> {
  const text = await readFile(file, "utf8");
  return text
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line));
}

/** Whether `pid` still runs; a killed child nobody reaped yet shows as a zombie. */
async function aliveState(pid: number): Promise<string> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state === "Z" || state === "X" ? "gone or zombie" : `running (${state})`;
  } catch {
    return "gone or zombie";
  }
}

describe("expandCommand", () => {
  it.each([
    [
      ["systemctl", "restart", "agent@{port}.service"],
      ["systemctl", "restart", "agent@9001.service"],
    ],
    [
      ["ssh", "{host}", "restart", "--node={node}"],
      ["ssh", "10.0.0.5", "restart", "--node=10.0.0.5:9001"],
    ],
    [
      ["echo", "{host}{port}{host}"],
      ["echo", "10.0.0.5900110.0.0.5"],
    ],
    [
      ["keep", "{unknown}", "{ host }", "{{port}}"],
      ["keep", "{unknown}", "{ host }", "{9001}"],
    ],
  ])("fills %j", (template, expected) => {
    expect(expandCommand(template, templateValues("10.0.0.5:9001"))).toEqual(expected);
  });

  it("takes IPv6 hosts without brackets", () => {
    expect(templateValues("[::1]:8080")).toEqual({ host: "::1", port: "8080", node: "[::1]:8080" });
  });

  it("inserts values literally: no re-expansion, no $ patterns", () => {
    const values = { host: "{port}", port: "$&$1$$", node: "$`" };
    expect(expandCommand(["a{host}b", "{port}", "{node}"], values)).toEqual([
      "a{port}b",
      "$&$1$$",
      "$`",
    ]);
  });
});

describe("runCommand with hostile values", () => {
  const hostile = [
    "; rm -rf /",
    "$(id)",
    "`id`",
    "a b  c",
    "line1\nline2",
    "' \" \\ | & > /tmp/pwned",
    "*",
    "-rf",
  ];

  it("hands each hostile value to the command as one literal argument, no shell", async () => {
    const out = join(dir, "argv.jsonl");
    const pwned = join(dir, "pwned");
    for (const value of hostile) {
      const values = { host: value, port: "9001", node: `${value}:9001` };
      const argv = expandCommand(
        [process.execPath, RECORDER, out, "{host}", "unit@{port}.service", "--node={node}"],
        values,
      );
      const result = await runCommand(argv, { timeoutMs: 10_000 });
      expect(result.outcome).toBe("ok");
    }
    // A shell would have split, substituted or redirected; execve kept every byte in place.
    const lines = await recorded(out);
    expect(lines.map((line) => line.args)).toEqual(
      hostile.map((value) => [value, "unit@9001.service", `--node=${value}:9001`]),
    );
    expect(existsSync(pwned)).toBe(false);
    expect(existsSync("/tmp/pwned")).toBe(false);
  });
});

describe("runCommand", () => {
  it("reports a non-zero exit with the tail of stderr, and keeps CLAWGATE_* secrets away", async () => {
    const out = join(dir, "argv.jsonl");
    process.env.CLAWGATE_ADMIN_TOKEN = "secret-token-never-shared";
    process.env.RECORD_EXIT = "3";
    try {
      const result = await runCommand([process.execPath, RECORDER, out, "x"], {
        timeoutMs: 10_000,
        env: { CLAWGATE_REMEDIATION_NODE: "10.0.0.5:9001" },
      });
      expect(result.outcome).toBe("failed");
      expect(result.evidence).toMatch(/exited 3; stderr: refusing on purpose with 3/);
      expect(result.evidence).not.toContain(out);
    } finally {
      delete process.env.CLAWGATE_ADMIN_TOKEN;
      delete process.env.RECORD_EXIT;
    }
    const [line] = await recorded(out);
    expect(line).toMatchObject({ args: ["x"], env: null, node: "10.0.0.5:9001" });
  });

  it("kills a command that outlives its timeout, children included", async () => {
    const pidFile = join(dir, "child.pid");
    const result = await runCommand(["/bin/sh", "-c", 'sleep 30 & echo $! > "$0"; wait', pidFile], {
      timeoutMs: 300,
      killGraceMs: 200,
    });
    expect(result.outcome).toBe("timeout");
    expect(result.evidence).toMatch(/sh still running after 300 ms, killed/);
    // The background sleep was in the command's process group, so it died with it.
    const child = Number((await readFile(pidFile, "utf8")).trim());
    expect(child).toBeGreaterThan(0);
    expect(await aliveState(child)).toBe("gone or zombie");
  });

  it("fails cleanly when the command does not exist", async () => {
    const result = await runCommand(["/nonexistent/restart-it"], { timeoutMs: 1_000 });
    expect(result).toMatchObject({ outcome: "failed" });
    expect(result.evidence).toMatch(/restart-it could not start: .*ENOENT/);
  });
});
