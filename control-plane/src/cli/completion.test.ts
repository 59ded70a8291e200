import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { runClawctl } from "./clawctl-program.js";

async function script(shell: string): Promise<string> {
  let stdout = "";
  const code = await runClawctl(["completion", shell], {
    env: {},
    stdout: (text) => {
      stdout += text;
    },
    stderr: () => undefined,
  });
  expect(code).toBe(0);
  return stdout;
}

/** What bash offers after `line` (the word being completed is the last one, maybe empty). */
function complete(bash: string, line: string): string[] {
  const words = line.split(" ");
  const program = [
    bash,
    `COMP_WORDS=(${words.map((word) => `'${word}'`).join(" ")})`,
    `COMP_CWORD=${words.length - 1}`,
    "_clawctl",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's ${...}, not a template
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join("\n");
  return execFileSync("bash", ["--norc", "-c", program], { encoding: "utf8" })
    .split("\n")
    .filter((word) => word !== "");
}

describe("clawctl completion", () => {
  it("completes commands, subcommands, options and their closed values in bash", async () => {
    const bash = await script("bash");
    expect(complete(bash, "clawctl to")).toEqual(["token"]);
    expect(complete(bash, "clawctl d")).toEqual(["delete", "dataplanes", "diff", "dump"]);
    expect(complete(bash, "clawctl token ")).toEqual(
      expect.arrayContaining(["create", "list", "revoke", "--help"]),
    );
    expect(complete(bash, "clawctl token create ci --role ")).toEqual([
      "admin",
      "editor",
      "viewer",
      "registrar",
    ]);
    expect(complete(bash, "clawctl --server http://x get ")).toEqual(
      expect.arrayContaining(["upstreams", "routes", "breakers", "tenants", "all", "--output"]),
    );
    expect(complete(bash, "clawctl get routes -o ")).toEqual(["table", "json", "yaml"]);
    expect(complete(bash, "clawctl diff --")).toEqual(
      expect.arrayContaining(["--filename", "--prune", "--help"]),
    );
    expect(complete(bash, "clawctl completion ")).toEqual(expect.arrayContaining(["bash", "zsh"]));
  });

  it("gives zsh the same function through bashcompinit", async () => {
    const zsh = await script("zsh");
    expect(zsh.startsWith("#compdef clawctl\n")).toBe(true);
    expect(zsh).toContain("bashcompinit");
    expect(zsh).toContain("complete -F _clawctl clawctl");
  });

  it("refuses a shell it has no script for, as a usage error", async () => {
    let stderr = "";
    const code = await runClawctl(["completion", "fish"], {
      env: {},
      stdout: () => undefined,
      stderr: (text) => {
        stderr += text;
      },
    });
    expect(code).toBe(2);
    expect(stderr).toContain("bash, zsh");
  });
});
