import { readFile } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import {
  CONTROL_PLANE_BIN,
  DATA_PLANE_BIN,
  REPO_ROOT,
  runToExit,
  Teardown,
} from "./support/index.js";

const teardown = new Teardown();
afterEach(() => teardown.run());

interface Documented {
  variable: string;
  default: string;
}

/**
 * The README's settings table that follows `heading` ("Control plane:"): setting name ->
 * variable and default, backticks and "(comma list)" notes dropped.
 */
function readmeTable(readme: string, heading: string): Map<string, Documented> {
  const after = readme.slice(readme.indexOf(`\n${heading}\n`));
  const table = after.slice(after.indexOf("| setting | variable | default |"));
  const rows = new Map<string, Documented>();
  for (const line of table.split("\n").slice(2)) {
    if (!line.startsWith("|")) break;
    const [name, variable, fallback] = line
      .split("|")
      .slice(1, 4)
      .map((cell) => cell.trim());
    rows.set(name!.replaceAll("`", ""), {
      variable: variable!.replace(/\s*\(comma list\)$/, "").replaceAll("`", ""),
      default: fallback!.replaceAll("`", ""),
    });
  }
  return rows;
}

/** `--help` output: setting name -> variable and default. */
function helpSettings(help: string): Map<string, Documented> {
  const settings = new Map<string, Documented>();
  const block = /^ {2}(\w+)\n {6}--[a-z0-9-]+ \S+, (CLAWGATE_[A-Z0-9_]+) \(default: (.*)\)$/gm;
  for (const match of help.matchAll(block)) {
    settings.set(match[1]!, { variable: match[2]!, default: match[3]! });
  }
  return settings;
}

describe("the README's settings tables", () => {
  it.each([
    ["Control plane:", CONTROL_PLANE_BIN],
    ["Data plane:", DATA_PLANE_BIN],
  ])("under %s match what the binary's --help says", async (heading, bin) => {
    const readme = await readFile(`${REPO_ROOT}README.md`, "utf8");
    const documented = readmeTable(readme, heading);
    const { code, output } = await runToExit(teardown, bin, ["--help"]);
    expect(code).toBe(0);
    const declared = helpSettings(output);
    expect(declared.size).toBeGreaterThan(10);
    expect([...documented.keys()].sort()).toEqual([...declared.keys()].sort());
    for (const [name, setting] of declared) {
      expect({ name, ...documented.get(name) }).toEqual({ name, ...setting });
    }
  });
});
