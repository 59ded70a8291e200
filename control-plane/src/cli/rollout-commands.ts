import { type Command, Option } from "commander";
import { stringify } from "yaml";
import type { RolloutView } from "../rollout/rollout-controller.js";
import type { AdminClient } from "./admin-client.js";
import { ClawctlError } from "./clawctl-error.js";
import type { CommandContext, Format } from "./command-context.js";

/** `clawctl rollout status|promote|abort`. */
export function addRolloutCommands(program: Command, ctx: CommandContext): void {
  const rollout = program
    .command("rollout")
    .description("follow, promote or abort a progressive rollout (apply with rollout: {...})");
  rollout
    .command("status")
    .description("show the rollout in progress (or the last one): canaries, bake time, outcomes")
    .addOption(
      new Option("-o, --output <format>", "output format")
        .choices(["table", "json", "yaml"])
        .default("table"),
    )
    .action(async (options: { output: Format }) => {
      const view = await readRollout(await ctx.client());
      if (options.output === "json") return ctx.out(`${JSON.stringify(view ?? null, null, 2)}\n`);
      if (options.output === "yaml") return ctx.out(stringify(view ?? null));
      ctx.out(view === undefined ? "No rollout has run.\n" : rolloutText(view));
    });
  rollout
    .command("promote")
    .description("send the version being baked to every data plane now")
    .action(async () => {
      const api = await ctx.client();
      const ended = await api.request<RolloutView>("POST", "/v1/rollout/promote");
      ctx.out(`version ${ended.version} promoted to every data plane\n`);
    });
  rollout
    .command("abort")
    .description("restore the config of the version before the rollout, on every data plane")
    .action(async () => {
      const api = await ctx.client();
      const ended = await api.request<RolloutView>("POST", "/v1/rollout/abort");
      ctx.out(
        `rollout of version ${ended.version} aborted: version ${ended.baseVersion}'s config restored as config revision ${ended.rollbackVersion}\n`,
      );
    });
}

/** The rollout, or undefined when none has run (404). */
export async function readRollout(api: AdminClient): Promise<RolloutView | undefined> {
  try {
    return await api.request<RolloutView>("GET", "/v1/rollout");
  } catch (error) {
    if (error instanceof ClawctlError && /no rollout has run/.test(error.message)) return undefined;
    throw error;
  }
}

/** The lines `rollout status` prints, and `status` under ROLLOUT. */
export function rolloutText(view: RolloutView): string {
  const ratio = (c: { requests: number; failures: number }) =>
    c.requests === 0
      ? "no requests"
      : `${c.failures} of ${c.requests} failed (${(c.failures / c.requests).toFixed(2)})`;
  const lines = [
    `STATE:      ${view.state}`,
    `VERSION:    ${view.version ?? "-"} (the rest stay on ${view.baseVersion})`,
    `CANARIES:   ${view.canaries.join(", ")}`,
    `BAKE UNTIL: ${view.bakeUntil} (${view.spec.bakeSeconds} s, maxErrorRatio ${view.spec.maxErrorRatio}, minRequests ${view.spec.minRequests})`,
    `CANARY:     ${ratio(view.outcomes.canary)}`,
    `REST:       ${ratio(view.outcomes.rest)}`,
  ];
  if (view.verdict !== undefined) {
    const { verdict } = view;
    lines.push(`VERDICT:    ${verdict.kind}${"reason" in verdict ? `: ${verdict.reason}` : ""}`);
  }
  if (view.reason !== undefined) lines.push(`REASON:     ${view.reason}`);
  if (view.rollbackVersion !== undefined) lines.push(`ROLLED BACK AS: ${view.rollbackVersion}`);
  return `${lines.join("\n")}\n`;
}
