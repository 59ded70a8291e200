import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { z } from "zod";
import { emptyLayer, type Layer, readCommandLine } from "./command-line.js";
import { ConfigError, type ConfigProblem } from "./config-error.js";
import {
  fromText,
  type SettingDeclarations,
  type SettingsOf,
  textKind,
} from "./setting-declaration.js";
import { recordOrigins } from "./setting-origins.js";

export interface LoadSettingsOptions<D extends SettingDeclarations> {
  /** Command-line arguments after the script. */
  argv: readonly string[];
  /** Environment to read CLAWGATE_* from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Reads the --config file; default fs.readFileSync as UTF-8. */
  readFile?: (path: string) => string;
  /**
   * Checks across settings (pairs that only make sense together), run on the validated
   * values; `originOf` names the layer a field's value came from.
   */
  check?: (settings: SettingsOf<D>, originOf: (field: keyof D) => string) => ConfigProblem[];
}

/**
 * Loads settings in layers, each overriding the one before: declared defaults, the YAML file
 * named by --config, CLAWGATE_* variables, then flags. Validated once against the declared
 * types and frozen. Every problem of every layer (a bad flag, an unreadable file, a bad value
 * wherever it came from) throws together in one ConfigError naming the field, the value
 * (unless secret) and its layer, so one run shows all there is to fix. The result remembers
 * each value's layer for checks made later (settingOrigin). `--help`/`--version` are not
 * settings: see helpOrVersion.
 */
export function loadSettings<D extends SettingDeclarations>(
  declarations: D,
  options: LoadSettingsOptions<D>,
): SettingsOf<D> {
  const readFile = options.readFile ?? ((path: string) => readFileSync(path, "utf8"));
  const commandLine = readCommandLine(declarations, options.argv);
  const problems: ConfigProblem[] = [...commandLine.problems];

  const merged: Layer = defaultsLayer(declarations);
  if (commandLine.configFile !== undefined) {
    const file = readYamlLayer(commandLine.configFile, readFile);
    if (file.ok) mergeInto(merged, file.layer);
    else problems.push(file.problem);
  }
  mergeInto(merged, readEnvLayer(declarations, options.env));
  mergeInto(merged, commandLine.layer);

  const parsed = schemaOf(declarations).safeParse(merged.values);
  const originOf = (field: keyof D) => merged.origins[field as string] ?? "default";
  if (parsed.success) {
    // Checks across settings need every value valid; they still run after a bad flag, whose
    // setting then keeps the value of the layer below, so their problems come in the same pass.
    problems.push(...(options.check?.(parsed.data as SettingsOf<D>, originOf) ?? []));
  } else {
    problems.push(
      ...parsed.error.issues.flatMap((issue) => toProblems(issue, merged, declarations)),
    );
  }
  if (problems.length > 0) {
    throw new ConfigError(problems.map((problem) => redacted(problem, declarations)));
  }
  const settings = deepFreeze(parsed.data as SettingsOf<D>);
  recordOrigins(settings, merged.origins);
  return settings;
}

/** A strict object: a misspelt key in the file is an error, not a silently ignored line. */
function schemaOf(declarations: SettingDeclarations) {
  return z.strictObject(
    Object.fromEntries(
      Object.entries(declarations).map(([field, declaration]) => [
        field,
        declaration.type.optional(),
      ]),
    ),
  );
}

function defaultsLayer(declarations: SettingDeclarations): Layer {
  const layer = emptyLayer();
  for (const [field, declaration] of Object.entries(declarations)) {
    if (declaration.default === undefined) continue;
    // A copy, so freezing the result never freezes the declaration's own array.
    layer.values[field] = Array.isArray(declaration.default)
      ? [...declaration.default]
      : declaration.default;
    layer.origins[field] = "default";
  }
  return layer;
}

function mergeInto(target: Layer, layer: Layer): void {
  Object.assign(target.values, layer.values);
  Object.assign(target.origins, layer.origins);
}

type FileLayer = { ok: true; layer: Layer } | { ok: false; problem: ConfigProblem };

function readYamlLayer(path: string, readFile: (path: string) => string): FileLayer {
  const failed = (what: string, err: unknown): FileLayer => {
    const reason = err instanceof Error ? err.message.split("\n")[0]! : String(err);
    return {
      ok: false,
      problem: {
        field: "config",
        value: path,
        layer: "flag --config",
        reason: `${what}: ${reason}`,
      },
    };
  };
  let text: string;
  try {
    text = readFile(path);
  } catch (err) {
    return failed("cannot read it", err);
  }
  let document: unknown;
  try {
    document = parseYaml()(text);
  } catch (err) {
    return failed("is not valid YAML", err);
  }
  // An empty file is an empty layer, not an error.
  if (document === null || document === undefined) return { ok: true, layer: emptyLayer() };
  const origin = `file ${path}`;
  if (typeof document !== "object" || Array.isArray(document)) {
    return {
      ok: false,
      problem: {
        field: "config",
        value: path,
        layer: origin,
        reason: "must be a YAML mapping of settings",
      },
    };
  }
  const layer = emptyLayer();
  for (const key of Object.keys(document)) {
    layer.values[key] = (document as Record<string, unknown>)[key];
    layer.origins[key] = origin;
  }
  return { ok: true, layer };
}

function readEnvLayer(
  declarations: SettingDeclarations,
  env: Readonly<Record<string, string | undefined>>,
): Layer {
  const layer = emptyLayer();
  for (const [field, declaration] of Object.entries(declarations)) {
    const text = env[declaration.variable];
    // An empty variable (common in systemd environment files) means "not set".
    if (text === undefined || text === "") continue;
    layer.values[field] = fromText(textKind(declaration), text);
    layer.origins[field] = `env ${declaration.variable}`;
  }
  return layer;
}

function toProblems(
  issue: z.core.$ZodIssue,
  merged: Layer,
  declarations: SettingDeclarations,
): ConfigProblem[] {
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => ({
      field: key,
      value: merged.values[key],
      layer: merged.origins[key] ?? "default",
      reason: `unknown setting; known settings: ${Object.keys(declarations).join(", ")}`,
    }));
  }
  const [head, ...rest] = issue.path;
  const root = String(head ?? "");
  return [
    {
      field:
        root +
        rest.map((part) => (typeof part === "number" ? `[${part}]` : `.${String(part)}`)).join(""),
      value: valueAt(merged.values, issue.path),
      layer: merged.origins[root] ?? "default",
      reason: issue.message,
    },
  ];
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let value = root;
  for (const part of path) {
    if (value === null || typeof value !== "object") return undefined;
    // Own keys only: a path into a setting never reads what Object.prototype holds.
    value = Object.hasOwn(value, part) ? (value as Record<PropertyKey, unknown>)[part] : undefined;
  }
  return value;
}

/** A secret's value never reaches a message or a log: only its field and layer do. */
function redacted(problem: ConfigProblem, declarations: SettingDeclarations): ConfigProblem {
  const root = problem.field.split(/[.[]/)[0] ?? "";
  return declarations[root]?.secret === true ? { ...problem, value: undefined } : problem;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * The YAML parser, loaded on the first --config file: most processes run on flags and
 * environment alone, and the parser's modules otherwise stay resident in every one of them
 * (about 1 MiB of heap). Loaded with require because settings are read synchronously.
 */
function parseYaml(): typeof import("yaml").parse {
  return (createRequire(import.meta.url)("yaml") as typeof import("yaml")).parse;
}
