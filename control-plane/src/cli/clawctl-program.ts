import { readFile } from "node:fs/promises";
import { RESOURCE_KINDS, type ResourceKind } from "@clawgate/proto";
import { packageVersion } from "@clawgate/runtime";
import { Argument, Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { stringify } from "yaml";
import { parseKind } from "../admin/kind-name.js";
import type { DataPlaneView } from "../fleet/data-plane-view.js";
import type { NodeHealthSummary } from "../health/fleet-health.js";
import type { ConfigEvent } from "../journal/config-event.js";
import type { HealEvent } from "../journal/heal-event.js";
import type { ListedNode } from "../registry/node-registry.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import { type AdminClient, createAdminClient } from "./admin-client.js";
import { fetchTrusting } from "./ca-fetch.js";
import { ClawctlError, ClawctlExit, EXIT_USAGE } from "./clawctl-error.js";
import type { CommandContext, Format, ResourceView } from "./command-context.js";
import { bashCompletion, zshCompletion } from "./completion.js";
import { dumpYaml, manifestYaml, readCurrentConfig } from "./current-config.js";
import { addDiffCommands } from "./diff-command.js";
import { addHistoryCommands } from "./history-commands.js";
import { listAll } from "./list-pages.js";
import { parseManifest } from "./manifest.js";
import { KIND_COLUMNS } from "./resource-columns.js";
import { addRolloutCommands } from "./rollout-commands.js";
import { addStatusCommand } from "./status-command.js";
import { formatAge, renderTable } from "./table.js";
import { addTokenCommands } from "./token-commands.js";
import { DEFAULT_TOKEN_FILE, lookUpToken, unauthorizedHint } from "./token-lookup.js";

/** Where clawctl reads and writes; every field defaults to the real process. */
export interface ClawctlIo {
  /** Default the global fetch. */
  fetch?: typeof fetch;
  /** Default process.stdout. */
  stdout?: (text: string) => void;
  /** Default process.stderr. */
  stderr?: (text: string) => void;
  /** Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Reads `apply -f -`; default all of process.stdin. */
  readStdin?: () => Promise<string>;
  /** Reads files (`apply -f`, the token file); default fs.readFile as UTF-8. */
  readFile?: (path: string) => Promise<string>;
  /** Milliseconds since the epoch, for LAST SEEN; default Date.now. */
  now?: () => number;
  /** Whether stdout is a terminal (diff colours its lines there); default process.stdout.isTTY. */
  isTty?: boolean;
}

interface ApplyResponse {
  revision: number;
  dryRun: boolean;
  results: { kind: string; name: string; action: string; revision: number }[];
}

const DEFAULT_SERVER = "http://127.0.0.1:9180";
/** The control plane package's version: clawctl ships with the API it speaks to. */
const CLAWCTL_VERSION = packageVersion(new URL("../../package.json", import.meta.url));

/**
 * Builds the clawctl command tree. Actions throw ClawctlError; runClawctl turns that and
 * commander's usage errors into exit statuses.
 */
export function buildClawctlProgram(io: ClawctlIo = {}): Command {
  const out = io.stdout ?? ((text: string) => void process.stdout.write(text));
  const err = io.stderr ?? ((text: string) => void process.stderr.write(text));
  const env = io.env ?? process.env;
  const read = io.readFile ?? ((path: string) => readFile(path, "utf8"));
  const now = io.now ?? Date.now;

  const program = new Command("clawctl")
    .description("Manage Clawgate config through the control plane's admin API")
    .exitOverride()
    .configureOutput({ writeOut: out, writeErr: err })
    .showHelpAfterError()
    .version(CLAWCTL_VERSION, "-V, --version", "print the version and exit")
    .helpOption("-h, --help", "print help for clawctl or a command and exit")
    .option("--server <url>", `admin API URL (env CLAWGATE_ADMIN_URL, default ${DEFAULT_SERVER})`)
    .option(
      "--token <token>",
      `bearer token (env CLAWGATE_ADMIN_TOKEN, or a file named by CLAWGATE_ADMIN_TOKEN_FILE, default ${DEFAULT_TOKEN_FILE})`,
    )
    .option(
      "--ca-file <file>",
      "PEM CA to trust for an https --server signed by a private CA (env CLAWGATE_ADMIN_CA_FILE)",
    );

  async function client(): Promise<AdminClient> {
    const flags = program.opts<{ server?: string; token?: string; caFile?: string }>();
    const server = flags.server ?? env.CLAWGATE_ADMIN_URL ?? DEFAULT_SERVER;
    if (!URL.canParse(server) || !/^https?:$/.test(new URL(server).protocol)) {
      throw new ClawctlError(`--server must be an http(s) URL, got ${server}`, EXIT_USAGE);
    }
    const caFile = flags.caFile ?? (env.CLAWGATE_ADMIN_CA_FILE || undefined);
    let doFetch = io.fetch;
    if (caFile !== undefined) {
      let ca: string;
      try {
        ca = await read(caFile);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new ClawctlError(`cannot read the --ca-file ${caFile}: ${reason}`, EXIT_USAGE);
      }
      if (!ca.includes("-----BEGIN CERTIFICATE-----")) {
        throw new ClawctlError(`--ca-file ${caFile} holds no PEM certificate`, EXIT_USAGE);
      }
      doFetch = fetchTrusting(ca);
    }
    const lookup = await lookUpToken({ flag: flags.token, env, read });
    return createAdminClient({
      server,
      token: lookup.token,
      fetch: doFetch,
      unauthorizedHint: unauthorizedHint(lookup),
    });
  }

  const ctx: CommandContext = {
    out,
    err,
    client,
    read,
    readStdin: io.readStdin ?? readProcessStdin,
    now,
    colour: (io.isTty ?? process.stdout.isTTY === true) && !env.NO_COLOR,
  };

  const outputOption = () =>
    new Option("-o, --output <format>", "output format")
      .choices(["table", "json", "yaml"])
      .default("table");

  program
    .command("get")
    .description("list the resources of a kind (or of every kind: get all), or show one")
    .argument("<kind>", `one of ${RESOURCE_KINDS.join(", ")} (singular works too), or all`)
    .argument("[name]", "resource name")
    .addOption(outputOption())
    .action(async (kindArg: string, name: string | undefined, options: { output: Format }) => {
      if (kindArg.toLowerCase() === "all" && name === undefined) {
        const config = await readCurrentConfig(await client());
        if (options.output === "json") return out(json(Object.fromEntries(config)));
        if (options.output === "yaml") return out(dumpYaml(config));
        const sections = [...config]
          .filter(([, items]) => items.length > 0)
          .map(([kind, items]) => `${kind.toUpperCase()}\n${resourceTable(kind, items)}`);
        return out(sections.length === 0 ? "No resources found.\n" : sections.join("\n"));
      }
      const kind = kindOf(kindArg);
      const api = await client();
      if (name === undefined) {
        const list = await listAll(api, kind);
        if (options.output === "json") return out(json(list));
        if (options.output === "yaml") return out(manifestYaml(kind, list.items));
        if (list.items.length === 0) return out(`No ${kind} found.\n`);
        return out(resourceTable(kind, list.items));
      }
      const one = await api.request<ResourceView>("GET", `/v1/${kind}/${encodeURIComponent(name)}`);
      if (options.output === "json") return out(json(one));
      if (options.output === "yaml") return out(manifestYaml(kind, [one]));
      out(resourceTable(kind, [one]));
    });

  program
    .command("apply")
    .description("create or update every resource in a file, atomically")
    .requiredOption("-f, --filename <file>", "YAML or JSON manifest; - reads stdin")
    .option("--dry-run", "check everything, change nothing")
    .option("--prune", "delete resources the manifest does not name")
    .addOption(outputOption())
    .action(
      async (options: { filename: string; dryRun?: boolean; prune?: boolean; output: Format }) => {
        const source = options.filename === "-" ? "stdin" : options.filename;
        let text: string;
        try {
          text =
            options.filename === "-"
              ? await (io.readStdin ?? readProcessStdin)()
              : await read(options.filename);
        } catch (error) {
          const reason = error instanceof Error ? error.message : String(error);
          throw new ClawctlError(`cannot read ${source}: ${reason}`);
        }
        const resources = parseManifest(text, source);
        // An empty manifest with --prune would delete everything: refuse it outright.
        if (resources.length === 0) throw new ClawctlError(`${source} holds no resources`);
        const api = await client();
        const result = await api.request<ApplyResponse>("POST", "/v1/apply", {
          resources,
          dryRun: options.dryRun ?? false,
          prune: options.prune ?? false,
        });
        if (options.output === "json") return out(json(result));
        if (options.output === "yaml") return out(stringify(result));
        const suffix = result.dryRun ? " (dry run)" : "";
        for (const item of result.results) {
          out(`${item.kind}/${item.name} ${item.action}${suffix}\n`);
        }
        if (!result.dryRun) out(`config revision ${result.revision}\n`);
      },
    );

  program
    .command("delete")
    .description("delete one resource")
    .argument("<kind>", `one of ${RESOURCE_KINDS.join(", ")} (singular works too)`)
    .argument("<name>", "resource name")
    .action(async (kindArg: string, name: string) => {
      const kind = kindOf(kindArg);
      const api = await client();
      await api.request("DELETE", `/v1/${kind}/${encodeURIComponent(name)}`);
      out(`${kind}/${name} deleted\n`);
    });

  program
    .command("snapshot")
    .description("show the newest config version and whether data planes are being sent it")
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const status = await (await client()).request<SnapshotStatus>("GET", "/v1/snapshot");
      if (options.output === "json") return out(json(status));
      if (options.output === "yaml") return out(stringify(status));
      out(snapshotText(status));
    });

  program
    .command("dataplanes")
    .description("list the data planes and the versions they applied")
    .addOption(outputOption())
    .action(async (options: { output: Format }) => {
      const fleet = await (await client()).request<{ items: DataPlaneView[] }>(
        "GET",
        "/v1/dataplanes",
      );
      if (options.output === "json") return out(json(fleet));
      if (options.output === "yaml") return out(stringify(fleet));
      if (fleet.items.length === 0) return out("No data planes connected.\n");
      const rows = fleet.items.map((dp) => [
        dp.nodeId,
        dp.state,
        String(dp.appliedVersion),
        dp.publishedVersion === null ? "-" : String(dp.publishedVersion),
        formatAge(dp.lastSeen, now()),
      ]);
      out(renderTable(["NODE ID", "STATE", "APPLIED", "PUBLISHED", "LAST SEEN"], rows));
    });

  program
    .command("events")
    .description("show the heal journal (or with --type config the config writes), newest first")
    .option("--upstream <name>", "only events of this upstream")
    .addOption(
      new Option("--type <type>", "heal: self-healing actions; config: who changed what")
        .choices(["heal", "config"])
        .default("heal"),
    )
    .addOption(
      new Option("--limit <n>", "most events shown (1-1000)").default(50).argParser(parseLimit),
    )
    .addOption(outputOption())
    .action(async (options: { upstream?: string; type: string; limit: number; output: Format }) => {
      const query = new URLSearchParams({ limit: String(options.limit) });
      if (options.type === "config") {
        query.set("type", "config");
        const audit = await (await client()).request<{ items: ConfigEvent[] }>(
          "GET",
          `/v1/events?${query}`,
        );
        if (options.output === "json") return out(json(audit));
        if (options.output === "yaml") return out(stringify(audit));
        if (audit.items.length === 0) return out("No config writes found.\n");
        const rows = audit.items.map((event) => [
          event.time.replace(/\.\d{3}Z$/, "Z"),
          event.token,
          String(event.revision),
          oneLine(event.changes.map((c) => `${c.action} ${c.kind}/${c.name}`).join(", ")),
        ]);
        return out(renderTable(["TIME", "TOKEN", "REVISION", "CHANGES"], rows));
      }
      if (options.upstream !== undefined) query.set("upstream", options.upstream);
      const events = await (await client()).request<{ items: HealEvent[] }>(
        "GET",
        `/v1/events?${query}`,
      );
      if (options.output === "json") return out(json(events));
      if (options.output === "yaml") return out(stringify(events));
      if (events.items.length === 0) return out("No events found.\n");
      const rows = events.items.map((event) => [
        event.time.replace(/\.\d{3}Z$/, "Z"),
        event.upstream,
        event.node ?? "-",
        event.action,
        event.outcome ?? "-",
        oneLine(event.evidence ?? "-"),
      ]);
      out(renderTable(["TIME", "UPSTREAM", "NODE", "ACTION", "OUTCOME", "EVIDENCE"], rows));
    });

  program
    .command("nodes")
    .description("list an upstream's nodes: from its document and from the registry")
    .argument("<upstream>", "upstream name")
    .addOption(outputOption())
    .action(async (upstream: string, options: { output: Format }) => {
      const nodes = await (await client()).request<{ items: ListedNode[] }>(
        "GET",
        `/v1/upstreams/${encodeURIComponent(upstream)}/nodes`,
      );
      if (options.output === "json") return out(json(nodes));
      if (options.output === "yaml") return out(stringify(nodes));
      if (nodes.items.length === 0) return out(`Upstream ${upstream} has no nodes.\n`);
      const rows = nodes.items.map((node) => [
        node.address,
        String(node.weight),
        node.source,
        node.id ?? "-",
        // A registration the document overrides is kept but not balanced over.
        node.active ? "yes" : "no (shadowed by config)",
        node.ttlSeconds === undefined ? "-" : `${node.ttlSeconds}s`,
        node.expiresInSeconds === undefined || node.expiresInSeconds === null
          ? "-"
          : `${node.expiresInSeconds}s`,
      ]);
      out(renderTable(["ADDRESS", "WEIGHT", "SOURCE", "ID", "ACTIVE", "TTL", "EXPIRES IN"], rows));
    });

  program
    .command("health")
    .description("show how the data planes see an upstream's nodes, and the majority verdict")
    .argument("<upstream>", "upstream name")
    .addOption(outputOption())
    .action(async (upstream: string, options: { output: Format }) => {
      const health = await (await client()).request<UpstreamHealthView>(
        "GET",
        `/v1/upstreams/${encodeURIComponent(upstream)}/health`,
      );
      if (options.output === "json") return out(json(health));
      if (options.output === "yaml") return out(stringify(health));
      if (health.nodes.length === 0) return out(`Upstream ${upstream} has no nodes.\n`);
      const rows = health.nodes.map((node) => [
        node.address,
        node.majority,
        String(node.healthy),
        String(node.quarantined),
        String(node.evicted),
        String(node.total),
        node.remediation === undefined
          ? "-"
          : `${node.remediation.attempts} attempt(s)${node.remediation.lastOutcome ? `, last ${node.remediation.lastOutcome}` : ""}`,
        oneLine(
          node.reports.find((report) => report.state !== "healthy")?.evidence ||
            node.reports[0]?.evidence ||
            "-",
        ),
      ]);
      out(
        renderTable(
          [
            "ADDRESS",
            "MAJORITY",
            "HEALTHY",
            "QUARANTINED",
            "EVICTED",
            "REPORTING",
            "REMEDIATION",
            "EVIDENCE",
          ],
          rows,
        ),
      );
    });

  addDiffCommands(program, ctx);
  addStatusCommand(program, ctx);
  addTokenCommands(program, ctx);
  addHistoryCommands(program, ctx);
  addRolloutCommands(program, ctx);

  program
    .command("completion")
    .description("print a shell completion script: source <(clawctl completion bash)")
    .addArgument(new Argument("<shell>", "bash or zsh").choices(["bash", "zsh"]))
    .action((shell: "bash" | "zsh") => {
      const hints = {
        get: [...RESOURCE_KINDS, "all"],
        delete: [...RESOURCE_KINDS],
      };
      out(shell === "bash" ? bashCompletion(program, hints) : zshCompletion(program, hints));
    });

  return program;
}

/** `GET /v1/upstreams/{name}/health` as clawctl reads it. */
interface UpstreamHealthView {
  upstream: string;
  dataPlanes: number;
  nodes: (Omit<NodeHealthSummary, "upstream"> & {
    remediation?: { attempts: number; running: boolean; lastOutcome?: string };
  })[];
}

/** Evidence longer than this is cut in the table; -o json shows all of it. */
const EVIDENCE_COLUMN_CHARS = 80;

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > EVIDENCE_COLUMN_CHARS
    ? `${flat.slice(0, EVIDENCE_COLUMN_CHARS - 1)}…`
    : flat;
}

function parseLimit(value: string): number {
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1_000) {
    throw new InvalidArgumentError("must be an integer from 1 to 1000");
  }
  return limit;
}

/**
 * Runs clawctl with `argv` (the arguments after the program name) and resolves to its exit
 * status: 0 done, 1 refused by the API or a bad input file, 2 usage error.
 */
export async function runClawctl(argv: readonly string[], io: ClawctlIo = {}): Promise<number> {
  const err = io.stderr ?? ((text: string) => void process.stderr.write(text));
  const program = buildClawctlProgram(io);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : EXIT_USAGE;
    if (error instanceof ClawctlExit) return error.exitCode;
    if (error instanceof ClawctlError) {
      err(`Error: ${error.message}\n`);
      for (const line of error.lines) err(`${line}\n`);
      return error.exitCode;
    }
    throw error;
  }
}

function kindOf(input: string): ResourceKind {
  const kind = parseKind(input);
  if (kind === undefined) {
    throw new ClawctlError(
      `unknown kind ${input}; use one of ${RESOURCE_KINDS.join(", ")}`,
      EXIT_USAGE,
    );
  }
  return kind;
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

function resourceTable(kind: ResourceKind, items: readonly ResourceView[]): string {
  const columns = KIND_COLUMNS[kind];
  const rows = items.map((item) => [item.name, String(item.revision), ...columns.cells(item.spec)]);
  return renderTable(["NAME", "REVISION", ...columns.headers], rows);
}

function snapshotText(status: SnapshotStatus): string {
  const counts = Object.entries(status.counts)
    .map(([kind, count]) => `${kind}=${count}`)
    .join(" ");
  const lines = [
    `VERSION:            ${status.version}`,
    `PUBLISHED:          ${status.published}`,
    `PUBLISHED VERSION:  ${status.publishedVersion ?? "-"}`,
  ];
  if (status.builtAt !== undefined) lines.push(`BUILT AT:           ${status.builtAt}`);
  lines.push(`RESOURCES:          ${counts}`);
  if (status.reason !== undefined) lines.push(`NOT PUBLISHED:      ${status.reason}`);
  for (const problem of status.problems ?? []) lines.push(`  - ${problem.key}: ${problem.message}`);
  return `${lines.join("\n")}\n`;
}

async function readProcessStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
