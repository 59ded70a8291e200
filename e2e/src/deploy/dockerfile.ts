/**
 * Just enough of a Dockerfile reader for the packaging tests, which run where no Docker engine
 * is: instructions per stage, with `\` continuations joined and comment lines dropped.
 */

export interface Instruction {
  /** Upper-cased: FROM, RUN, COPY, ... */
  keyword: string;
  /** The rest of the instruction, continuations joined with single spaces. */
  args: string;
  /** 1-based line the instruction starts on, for failure messages. */
  line: number;
}

export interface Stage {
  /** The `AS` name, if any. */
  name: string | undefined;
  base: string;
  instructions: Instruction[];
}

export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  let pending: { text: string; line: number } | undefined;
  const lines = text.split("\n");
  for (const [index, raw] of lines.entries()) {
    const trimmed = raw.trim();
    // Docker drops comment lines even inside a continued instruction.
    if (trimmed.startsWith("#") || (trimmed === "" && pending === undefined)) continue;
    const continued = trimmed.endsWith("\\");
    const part = continued ? trimmed.slice(0, -1).trim() : trimmed;
    pending =
      pending === undefined
        ? { text: part, line: index + 1 }
        : { text: `${pending.text} ${part}`.trim(), line: pending.line };
    if (continued) continue;
    const match = /^(\S+)\s*(.*)$/.exec(pending.text);
    if (match !== null) {
      const instruction = { keyword: match[1]!.toUpperCase(), args: match[2]!, line: pending.line };
      if (instruction.keyword === "FROM") {
        const from = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
        if (from === null)
          throw new Error(`line ${instruction.line}: cannot read FROM ${instruction.args}`);
        stages.push({ base: from[1]!, name: from[2], instructions: [] });
      } else {
        const stage = stages.at(-1);
        if (stage === undefined)
          throw new Error(`line ${instruction.line}: ${instruction.keyword} before FROM`);
        stage.instructions.push(instruction);
      }
    }
    pending = undefined;
  }
  return stages;
}

/** The instructions of a stage with this keyword. */
export function instructionsOf(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((i) => i.keyword === keyword);
}

/** The JSON (exec) form of ENTRYPOINT, CMD or HEALTHCHECK CMD, or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  const json = args.slice(args.indexOf("["));
  if (!args.includes("[")) return undefined;
  try {
    const parsed: unknown = JSON.parse(json);
    return Array.isArray(parsed) && parsed.every((a) => typeof a === "string") ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export interface Copy {
  /** The stage named by --from, if any. */
  from: string | undefined;
  sources: string[];
  destination: string;
}

/** A COPY's stage, sources and destination (the shell form; paths without spaces). */
export function parseCopy(args: string): Copy {
  const words = args.split(/\s+/).filter((w) => w !== "");
  let from: string | undefined;
  while (words[0]?.startsWith("--")) {
    const flag = words.shift()!;
    if (flag.startsWith("--from=")) from = flag.slice("--from=".length);
  }
  const destination = words.pop();
  if (destination === undefined || words.length === 0)
    throw new Error(`COPY ${args}: needs a source and a destination`);
  return { from, sources: words, destination };
}
