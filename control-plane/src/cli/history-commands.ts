import type { ResourceKind } from "@clawgate/proto";
import { type Command, InvalidArgumentError, Option } from "commander";
import { stringify } from "yaml";
import type { HistoricResource } from "../history/config-history.js";
import type { HistoryItem } from "../history/history-entry.js";
import type { CommandContext, Format, ResourceView } from "./command-context.js";
import { type ConfigListing, dumpYaml } from "./current-config.js";
import { renderTable } from "./table.js";

interface RollbackResponse {
  revision: number;
  from: number;
  to: number;
  results: { kind: string; name: string; action: string }[];
}

function parseVersion(value: string): number {
  if (!/^[1-9]\d*$/.test(value)) {
    throw new InvalidArgumentError(`version must be a positive integer, got ${value}`);
  }
  return Number(value);
}

/** `clawctl history [version]` and `clawctl rollback <version>`. */
export function addHistoryCommands(program: Command, ctx: CommandContext): void {
  program
    .command("history")
    .description(
      "list config versions (author, time, changes), or with a version print the config as it was then",
    )
    .argument("[version]", "a version to show as a manifest `clawctl apply -f` takes", parseVersion)
    .addOption(
      new Option("-o, --output <format>", "output format (a version: yaml unless json)")
        .choices(["table", "json", "yaml"])
        .default("table"),
    )
    .action(async (version: number | undefined, options: { output: Format }) => {
      const api = await ctx.client();
      if (version !== undefined) {
        const at = await api.request<HistoryItem & { resources: HistoricResource[] }>(
          "GET",
          `/v1/history/${version}`,
        );
        if (options.output === "json") return ctx.out(`${JSON.stringify(at, null, 2)}\n`);
        return ctx.out(dumpYaml(listing(at.resources)));
      }
      const list = await api.request<{ items: HistoryItem[] }>("GET", "/v1/history");
      if (options.output === "json") return ctx.out(`${JSON.stringify(list, null, 2)}\n`);
      if (options.output === "yaml") return ctx.out(stringify(list));
      if (list.items.length === 0) return ctx.out("No config versions kept yet.\n");
      const rows = list.items.map((item) => [
        String(item.version),
        item.time,
        item.author,
        item.rollback === undefined
          ? item.summary
          : `rollback to ${item.rollback.to}: ${item.summary}`,
        item.changes.map((change) => `${change.kind}/${change.name}`).join(","),
      ]);
      ctx.out(renderTable(["VERSION", "TIME", "AUTHOR", "SUMMARY", "RESOURCES"], rows));
    });

  program
    .command("rollback")
    .description("restore the config of an earlier version, atomically, as a new version")
    .argument(
      "<version>",
      "the version whose config to restore (see clawctl history)",
      parseVersion,
    )
    .action(async (version: number) => {
      const api = await ctx.client();
      const result = await api.request<RollbackResponse>("POST", "/v1/rollback", { version });
      for (const item of result.results) {
        if (item.action !== "unchanged") ctx.out(`${item.kind}/${item.name} ${item.action}\n`);
      }
      ctx.out(
        result.results.every((item) => item.action === "unchanged")
          ? `config already as at version ${version}; nothing changed\n`
          : `rolled back from version ${result.from} to version ${version}: config revision ${result.revision}\n`,
      );
    });
}

function listing(resources: readonly HistoricResource[]): ConfigListing {
  const byKind: ConfigListing = new Map();
  for (const resource of resources) {
    const kind = resource.kind as ResourceKind;
    const items = byKind.get(kind) ?? [];
    const view: ResourceView = { name: resource.name, revision: 0, spec: resource.spec };
    items.push(view);
    byKind.set(kind, items);
  }
  return byKind;
}
