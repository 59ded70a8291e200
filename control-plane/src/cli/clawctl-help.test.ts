import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { buildClawctlProgram, runClawctl } from "./clawctl-program.js";

const VERSION: string = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
).version;

/** Runs clawctl with a fetch that fails the test if anything reaches for the network. */
async function run(args: string[]) {
  let stdout = "";
  let stderr = "";
  let fetched = false;
  const code = await runClawctl(args, {
    env: {},
    fetch: async () => {
      fetched = true;
      throw new Error("--help and --version must not call the admin API");
    },
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
  });
  return { code, stdout, stderr, fetched };
}

describe("clawctl --help and --version", () => {
  it.each([["--version"], ["-V"]])("%s prints the package version and exits 0", async (flag) => {
    const result = await run([flag]);
    expect(result).toMatchObject({ code: 0, stderr: "", fetched: false });
    expect(result.stdout.trim()).toBe(VERSION);
  });

  it("lists every command and --version in the top-level help", async () => {
    const result = await run(["--help"]);
    expect(result).toMatchObject({ code: 0, stderr: "", fetched: false });
    expect(result.stdout).toContain("-V, --version");
    for (const command of buildClawctlProgram().commands) {
      expect(result.stdout).toContain(command.name());
    }
  });

  // Every command at every depth: `token create` as well as `get`.
  const paths: string[][] = [];
  const walk = (command: ReturnType<typeof buildClawctlProgram>, path: string[]) => {
    for (const sub of command.commands) {
      paths.push([...path, sub.name()]);
      walk(sub, [...path, sub.name()]);
    }
  };
  walk(buildClawctlProgram(), []);
  it.each(paths.map((path) => path.join(" ")))(
    "%s --help prints its usage and exits 0 without calling the API",
    async (name) => {
      const result = await run([...name.split(" "), "--help"]);
      expect(result).toMatchObject({ code: 0, stderr: "", fetched: false });
      expect(result.stdout).toContain(`Usage: clawctl ${name}`);
    },
  );
});
