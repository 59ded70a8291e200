import { parseArgs } from "node:util";
import type { ConfigProblem } from "./config-error.js";
import { fromText, type SettingDeclarations, textKind } from "./setting-declaration.js";

/** One layer's raw values and, per field, where each came from. */
export interface Layer {
  values: Record<string, unknown>;
  origins: Record<string, string>;
}

/**
 * Null-prototype records: a YAML key "__proto__" merged into a plain object would replace its
 * prototype and hand validation settings nobody can see; here it stays a key, reported as
 * unknown.
 */
export function emptyLayer(): Layer {
  return { values: Object.create(null), origins: Object.create(null) };
}

export interface CommandLine {
  /** `--help`/`-h` or `--version`/`-V`, when given: print and exit, start nothing. */
  request?: "help" | "version";
  /** The YAML file named by --config. */
  configFile?: string;
  layer: Layer;
  problems: ConfigProblem[];
}

const INFO_OPTIONS = {
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "V" },
} as const;

/**
 * Reads flags: `--config FILE`, one `--<flag> VALUE` per setting, `--help`, `--version`.
 * Unknown flags, flags without a value and stray arguments come back as problems, each by name.
 */
export function readCommandLine(
  declarations: SettingDeclarations,
  argv: readonly string[],
): CommandLine {
  const fieldByFlag = new Map(
    Object.entries(declarations).map(([field, declaration]) => [declaration.flag, field]),
  );
  const options = Object.fromEntries(
    ["config", ...fieldByFlag.keys()].map((flag) => [flag, { type: "string" as const }]),
  );
  // Not strict: unknown flags come back as tokens, so each is reported by name.
  const { tokens } = parseArgs({
    args: [...argv],
    options: { ...options, ...INFO_OPTIONS },
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const known = ["--config", ...[...fieldByFlag.keys()].map((flag) => `--${flag}`)];
  const result: CommandLine = { layer: emptyLayer(), problems: [] };
  for (const token of tokens) {
    if (token.kind === "positional") {
      result.problems.push({
        field: "arguments",
        value: token.value,
        layer: "flags",
        reason: "unexpected argument; settings are given as --name value",
      });
      continue;
    }
    if (token.kind !== "option") continue;
    if (token.name === "help" || token.name === "version") {
      // Help wins over version, whichever came first: it says how to ask for the version.
      if (result.request !== "help") result.request = token.name;
      continue;
    }
    const layer = `flag ${token.rawName}`;
    const field = fieldByFlag.get(token.name);
    if (token.name !== "config" && field === undefined) {
      result.problems.push({
        field: token.rawName,
        value: token.value,
        layer,
        reason: `unknown flag; known flags: ${known.join(", ")} (--help lists them)`,
      });
      continue;
    }
    if (token.value === undefined) {
      result.problems.push({
        field: token.rawName,
        value: undefined,
        layer,
        reason: `needs a value (${token.rawName} value or ${token.rawName}=value)`,
      });
      continue;
    }
    if (field === undefined) {
      result.configFile = token.value;
      continue;
    }
    const kind = textKind(declarations[field]!);
    const value = fromText(kind, token.value);
    // A repeated list flag adds to the list; any other repeated flag keeps the last value.
    const previous = result.layer.values[field];
    result.layer.values[field] =
      kind === "list" && Array.isArray(previous) && Array.isArray(value)
        ? [...previous, ...value]
        : value;
    result.layer.origins[field] = layer;
  }
  return result;
}
