import { readCommandLine } from "./command-line.js";
import {
  type SettingDeclaration,
  type SettingDeclarations,
  textKind,
} from "./setting-declaration.js";

/** What `--help` and `--version` say about a binary. */
export interface ProgramInfo {
  /** Binary name, e.g. `clawgate-data-plane`. */
  program: string;
  /** One line on what the binary does. */
  summary: string;
  /** The package.json version. */
  version: string;
  settings: SettingDeclarations;
}

/**
 * The text to print when argv asks for `--help` or `--version`, else undefined. The binary
 * prints it to stdout and exits 0 without starting anything.
 */
export function helpOrVersion(argv: readonly string[], info: ProgramInfo): string | undefined {
  const { request } = readCommandLine(info.settings, argv);
  if (request === "help") return renderHelp(info);
  if (request === "version") return `${info.program} ${info.version}\n`;
  return undefined;
}

/** `--help`, generated from the declarations so it always lists what the loader reads. */
export function renderHelp(info: ProgramInfo): string {
  const lines = [
    `Usage: ${info.program} [--config FILE] [--<setting> VALUE]...`,
    "",
    info.summary,
    "",
    "Each setting is read from, each overriding the one before: its default, the YAML file",
    "named by --config (keys are the setting names below), its CLAWGATE_* variable, its flag.",
    "A bad value exits with status 2 and names the setting, the value and where it came from.",
    "",
    "Options:",
    "  --config FILE  YAML file of settings",
    "  -h, --help     print this help and exit",
    "  -V, --version  print the version and exit",
    "",
    "Settings:",
  ];
  for (const [name, declaration] of Object.entries(info.settings)) {
    lines.push(
      `  ${name}`,
      `      --${declaration.flag} ${valueHint(declaration)}, ${declaration.variable}` +
        ` (default: ${defaultText(declaration)})`,
      `      ${declaration.doc}`,
    );
  }
  return `${lines.join("\n")}\n`;
}

function valueHint(declaration: SettingDeclaration): string {
  const def = declaration.type.def;
  if (def.type === "enum" && "entries" in def) {
    return Object.values(def.entries as Record<string, string>).join("|");
  }
  switch (textKind(declaration)) {
    case "list":
      return "A,B,...";
    case "number":
      return "N";
    case "boolean":
      return "true|false";
    case "text":
      return "VALUE";
  }
}

function defaultText(declaration: SettingDeclaration): string {
  if (declaration.defaultText !== undefined) return declaration.defaultText;
  const value = declaration.default;
  if (value === undefined) return "none";
  return Array.isArray(value) ? value.join(",") : String(value);
}
