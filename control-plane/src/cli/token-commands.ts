import { type Command, Option } from "commander";
import { stringify } from "yaml";
import { ROLES } from "../auth/roles.js";
import type { TokenView } from "../auth/token-store.js";
import type { CommandContext, Format } from "./command-context.js";
import { renderTable } from "./table.js";

/** `clawctl token create|list|revoke`: named tokens with roles (needs an admin token). */
export function addTokenCommands(program: Command, ctx: CommandContext): void {
  // Made with program.command() so it inherits exitOverride and the output settings.
  const token = program
    .command("token")
    .description("create, list and revoke named tokens with roles");

  token
    .command("create")
    .description("create a token; its secret is printed once and never shown again")
    .argument("<name>", "token name, as logs and the audit journal show it")
    .addOption(
      new Option("--role <role>", "what the token may do")
        .choices([...ROLES])
        .makeOptionMandatory(),
    )
    .option(
      "--upstream <name...>",
      "upstreams a registrar token may register nodes in (registrar only)",
    )
    .action(async (name: string, options: { role: string; upstream?: string[] }) => {
      const created = await (await ctx.client()).request<{ token: string }>("POST", "/v1/tokens", {
        name,
        role: options.role,
        upstreams: options.upstream ?? [],
      });
      // The secret alone on stdout, so `clawctl token create ... > file` stores just the token.
      ctx.out(`${created.token}\n`);
      ctx.err(
        `token ${name} created with role ${options.role}; store it now, it is not shown again\n`,
      );
    });

  token
    .command("list")
    .description("list the named tokens: name, role, upstreams (never a secret)")
    .addOption(
      new Option("-o, --output <format>", "output format")
        .choices(["table", "json", "yaml"])
        .default("table"),
    )
    .action(async (options: { output: Format }) => {
      const list = await (await ctx.client()).request<{ items: TokenView[] }>("GET", "/v1/tokens");
      if (options.output === "json") return ctx.out(`${JSON.stringify(list, null, 2)}\n`);
      if (options.output === "yaml") return ctx.out(stringify(list));
      if (list.items.length === 0) return ctx.out("No tokens found.\n");
      const rows = list.items.map((item) => [
        item.name,
        item.role,
        item.upstreams.length === 0 ? "-" : item.upstreams.join(","),
        item.createdAt,
        item.createdBy ?? "-",
      ]);
      ctx.out(renderTable(["NAME", "ROLE", "UPSTREAMS", "CREATED", "CREATED BY"], rows));
    });

  token
    .command("revoke")
    .description("revoke a token: requests carrying it get 401 from then on")
    .argument("<name>", "token name")
    .action(async (name: string) => {
      await (await ctx.client()).request("DELETE", `/v1/tokens/${encodeURIComponent(name)}`);
      ctx.out(`token ${name} revoked\n`);
    });
}
