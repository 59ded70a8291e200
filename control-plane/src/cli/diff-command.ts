import type { Command } from "commander";
import { ClawctlError, ClawctlExit } from "./clawctl-error.js";
import type { CommandContext } from "./command-context.js";
import { type CurrentConfig, diffConfig } from "./config-diff.js";
import { dumpYaml, readCurrentConfig } from "./current-config.js";
import { renderDiff } from "./field-diff.js";
import { parseManifest } from "./manifest.js";

/** diff's status on error: above 1, so a script tells "differences" from "could not tell". */
const EXIT_DIFF_ERROR = 2;

/** `clawctl diff -f` (exit 0 same, 1 differences, 2 error, like kubectl diff) and `dump`. */
export function addDiffCommands(program: Command, ctx: CommandContext): void {
  program
    .command("diff")
    .description(
      "show field by field what apply -f would change; exit 0 no differences, 1 differences, 2 error",
    )
    .requiredOption("-f, --filename <file>", "YAML or JSON manifest; - reads stdin")
    .option("--prune", "also show the resources apply --prune would delete")
    .action(async (options: { filename: string; prune?: boolean }) => {
      let diffs: ReturnType<typeof diffConfig>;
      try {
        const source = options.filename === "-" ? "stdin" : options.filename;
        const text = await readSource(ctx, options.filename, source);
        const manifest = parseManifest(text, source);
        const listing = await readCurrentConfig(await ctx.client());
        const current: CurrentConfig = new Map(
          [...listing].map(([kind, items]) => [
            kind,
            new Map(items.map((item) => [item.name, item.spec])),
          ]),
        );
        diffs = diffConfig(manifest, current, options.prune ?? false);
      } catch (error) {
        if (error instanceof ClawctlError) {
          throw new ClawctlError(error.message, EXIT_DIFF_ERROR, error.lines);
        }
        throw error;
      }
      if (!diffs.ok) {
        throw new ClawctlError(
          "the manifest is invalid",
          EXIT_DIFF_ERROR,
          diffs.problems.map((problem) => `  - ${problem}`),
        );
      }
      ctx.out(renderDiff(diffs.diffs, ctx.colour));
      if (diffs.diffs.length > 0) throw new ClawctlExit(1);
    });

  program
    .command("dump")
    .description("print the whole config as one YAML manifest that apply -f takes back unchanged")
    .action(async () => {
      ctx.out(dumpYaml(await readCurrentConfig(await ctx.client())));
    });
}

async function readSource(ctx: CommandContext, filename: string, source: string): Promise<string> {
  try {
    return filename === "-" ? await ctx.readStdin() : await ctx.read(filename);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ClawctlError(`cannot read ${source}: ${reason}`);
  }
}
