import type { Command, Option } from "commander";

/** Words to offer as a command's arguments, beyond what its Argument choices declare. */
export type ArgumentHints = Readonly<Record<string, readonly string[]>>;

interface CommandNode {
  /** Command path without the program name: "", "get", "token create". */
  path: string;
  /** Subcommands, options and argument words offered after the path. */
  words: string[];
}

/**
 * A bash completion script for `program`, read from its command tree so it always lists the
 * commands and options clawctl has. It completes subcommands, options, option values that are
 * a closed list (-o table|json|yaml), and the argument words `hints` gives per command path.
 */
export function bashCompletion(program: Command, hints: ArgumentHints = {}): string {
  const name = program.name();
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, "_")}`;
  const nodes = walk(program, "", hints);
  const paths = nodes.filter((node) => node.path !== "").map((node) => quote(node.path));
  const valueOptions = new Map<string, string[]>();
  const takesValue = new Set<string>();
  for (const option of allOptions(program)) {
    const flags = [option.short, option.long].filter((flag): flag is string => flag !== undefined);
    if (option.required || option.optional) for (const flag of flags) takesValue.add(flag);
    if (option.argChoices !== undefined) {
      for (const flag of flags) valueOptions.set(flag, option.argChoices);
    }
  }
  const lines = [
    `# bash completion for ${name}; load with: source <(${name} completion bash)`,
    `${fn}() {`,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's ${...}, not a template
    '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
    '  local path="" word i skip=0',
    "  # The command path so far: each word that extends it to a known command, skipping options",
    "  # and the values of options that take one.",
    "  for ((i = 1; i < COMP_CWORD; i++)); do",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's ${...}, not a template
    '    word="${COMP_WORDS[i]}"',
    "    if ((skip)); then skip=0; continue; fi",
    '    case "$word" in',
    ...(takesValue.size > 0
      ? [`      ${[...takesValue].map(quote).join("|")}) skip=1; continue ;;`]
      : []),
    "      -*) continue ;;",
    "    esac",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's ${...}, not a template
    '    case "${path:+$path }$word" in',
    ...(paths.length > 0 ? [`      ${paths.join("|")}) path="\${path:+$path }$word" ;;`] : []),
    "    esac",
    "  done",
    '  case "$prev" in',
    ...[...valueOptions].map(
      ([flag, choices]) =>
        `    ${quote(flag)}) COMPREPLY=($(compgen -W ${quote(choices.join(" "))} -- "$cur")); return ;;`,
    ),
    "  esac",
    "  local words",
    '  case "$path" in',
    ...nodes.map((node) => `    ${quote(node.path)}) words=${quote(node.words.join(" "))} ;;`),
    "  esac",
    '  COMPREPLY=($(compgen -W "$words" -- "$cur"))',
    "}",
    `complete -F ${fn} ${name}`,
  ];
  return `${lines.join("\n")}\n`;
}

/**
 * The zsh script: zsh's bashcompinit runs the bash function as it is, so both shells offer the
 * same words from one generator.
 */
export function zshCompletion(program: Command, hints: ArgumentHints = {}): string {
  const name = program.name();
  return [
    `#compdef ${name}`,
    `# zsh completion for ${name}; load with: source <(${name} completion zsh)`,
    "autoload -U +X compinit && compinit",
    "autoload -U +X bashcompinit && bashcompinit",
    bashCompletion(program, hints),
  ].join("\n");
}

function walk(command: Command, path: string, hints: ArgumentHints): CommandNode[] {
  const words = [
    ...command.commands.map((sub) => sub.name()),
    ...(command.registeredArguments[0]?.argChoices ?? []),
    ...(hints[path] ?? []),
    ...optionFlags(command),
  ];
  const nodes: CommandNode[] = [{ path, words }];
  for (const sub of command.commands) {
    nodes.push(...walk(sub, path === "" ? sub.name() : `${path} ${sub.name()}`, hints));
  }
  return nodes;
}

function optionFlags(command: Command): string[] {
  const flags: string[] = [];
  for (const option of command.options) {
    if (option.long !== undefined) flags.push(option.long);
  }
  // commander adds --help itself; it is not in `options`.
  flags.push("--help");
  return flags;
}

function allOptions(command: Command): Option[] {
  return [...command.options, ...command.commands.flatMap(allOptions)];
}

/** A word in single quotes for the script; commands, flags and choices never hold a quote. */
function quote(word: string): string {
  return `'${word.replace(/'/g, "'\\''")}'`;
}
