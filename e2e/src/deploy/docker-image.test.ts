import { execFile } from "node:child_process";
import { cp, mkdir, readdir, readFile, rename, symlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { freePorts } from "../support/free-port.js";
import { ManagedProcess } from "../support/managed-process.js";
import { REPO_ROOT } from "../support/paths.js";
import { Teardown } from "../support/teardown.js";
import { waitFor } from "../support/wait-for.js";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import { execForm, instructionsOf, parseCopy, parseDockerfile, type Stage } from "./dockerfile.js";

// There is no Docker engine where the tests run, so the image is checked in two ways: the
// Dockerfile is read for what the image promises (stages, user, entry point, ports, health
// check), and its production-only install and file layout are replayed into a temp directory,
// from which the binaries are started the way the image starts them.

const run = promisify(execFile);
const stages = parseDockerfile(await readFile(join(REPO_ROOT, "Dockerfile"), "utf8"));
const final = stages.at(-1)!;
const values = parse(await readFile(join(REPO_ROOT, "charts/clawgate/values.yaml"), "utf8"));
const ignored = (await readFile(join(REPO_ROOT, ".dockerignore"), "utf8"))
  .split("\n")
  .map((line) => line.trim())
  .filter((line) => line !== "" && !line.startsWith("#"));

/** Dev-only packages that must never reach the image. */
const DEV_ONLY = [
  "typescript",
  "vitest",
  "vite",
  "@biomejs/biome",
  "@bufbuild/buf",
  "@aws-cdk/lambda-layer-kubectl-v35",
  "aws-cdk-lib",
];

function last(stage: Stage, keyword: string): string {
  const found = instructionsOf(stage, keyword).at(-1);
  if (found === undefined) throw new Error(`the final stage has no ${keyword}`);
  return found.args;
}

/** The stage the final image takes node_modules from, and that COPY. */
function nodeModulesSource(): { stage: Stage; path: string } {
  const copy = instructionsOf(final, "COPY")
    .map((i) => parseCopy(i.args))
    .find((c) => c.destination.replace(/\/$/, "").endsWith("node_modules"));
  if (copy?.from === undefined)
    throw new Error("the final stage copies no node_modules from a stage");
  const stage = stages.find((s) => s.name === copy.from);
  if (stage === undefined) throw new Error(`no stage named ${copy.from}`);
  return { stage, path: copy.sources[0]! };
}

/** A .dockerignore pattern as a regular expression over context-relative paths. */
function ignorePattern(pattern: string): RegExp {
  const body = pattern
    .replace(/^\//, "")
    .split(/(\*\*\/|\*)/)
    .map((part) =>
      part === "**/"
        ? "(?:.*/)?"
        : part === "*"
          ? "[^/]*"
          : part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"),
    )
    .join("");
  return new RegExp(`^${body}$`);
}

function excludedBy(path: string): string | undefined {
  const segments = path.replace(/\/$/, "").split("/");
  for (let i = 1; i <= segments.length; i++) {
    const prefix = segments.slice(0, i).join("/");
    const hit = ignored.find((pattern) => ignorePattern(pattern).test(prefix));
    if (hit !== undefined) return hit;
  }
  return undefined;
}

describe("Dockerfile", () => {
  it("builds in stages and runs the final image as the chart's non-root user", () => {
    expect(stages.length).toBeGreaterThanOrEqual(3);
    expect(final.base).toMatch(/-slim$/);
    const [user, group] = last(final, "USER").split(":");
    expect(user).not.toMatch(/^(0|root)$/);
    expect(Number(user)).toBe(values.podSecurityContext.runAsUser);
    expect(Number(group)).toBe(values.podSecurityContext.runAsGroup);
  });

  it("starts tini, then the launcher that picks a plane; with no command it shows help", () => {
    const entrypoint = execForm(last(final, "ENTRYPOINT"));
    expect(entrypoint?.slice(0, 2)).toEqual(["/usr/bin/tini", "--"]);
    expect(entrypoint?.[2]).toBe("/usr/local/bin/clawgate");
    expect(execForm(last(final, "CMD"))).toEqual(["help"]);
    // The chart's `command:` names the binaries: they are on PATH in the image.
    const links = instructionsOf(final, "RUN")
      .map((i) => i.args)
      .join(" ");
    for (const binary of [...values.controlPlane.command, ...values.dataPlane.command, "clawctl"]) {
      expect(links).toContain(`/usr/local/bin/${binary}`);
    }
  });

  it("exposes the ports the chart uses and checks health with node, not curl", () => {
    const exposed = instructionsOf(final, "EXPOSE").flatMap((i) => i.args.split(/\s+/).map(Number));
    expect(exposed.sort()).toEqual(
      [
        values.controlPlane.adminPort,
        values.controlPlane.grpcPort,
        values.dataPlane.proxyPort,
        values.dataPlane.adminPort,
      ].sort(),
    );
    const check = execForm(last(final, "HEALTHCHECK"));
    expect(check?.[0]).toBe("node");
    expect(check?.[1]).toMatch(/healthcheck\.mjs$/);
  });

  it("ships only production dependencies: node_modules comes from `npm ci --omit=dev`", () => {
    const { stage } = nodeModulesSource();
    const installs = instructionsOf(stage, "RUN").filter((i) =>
      /\bnpm (ci|install)\b/.test(i.args),
    );
    expect(installs.map((i) => i.args)).toEqual([expect.stringMatching(/^npm ci .*--omit=dev/)]);
    // Nothing installs or prunes in the final stage itself.
    expect(instructionsOf(final, "RUN").filter((i) => /\bnpm\b/.test(i.args))).toEqual([]);
  });

  it("copies nothing that .dockerignore keeps out, and keeps host builds and secrets out", () => {
    for (const pattern of [
      "node_modules",
      "**/node_modules",
      "**/dist",
      ".git",
      ".clawgate",
      "*.pem",
    ]) {
      expect(ignored).toContain(pattern);
    }
    const local = stages.flatMap((stage) =>
      instructionsOf(stage, "COPY")
        .map((i) => parseCopy(i.args))
        .filter((c) => c.from === undefined)
        .flatMap((c) => c.sources),
    );
    expect(local.length).toBeGreaterThan(0);
    expect(local.filter((source) => excludedBy(source) !== undefined)).toEqual([]);
  });
});

describe("the image's production tree, replayed without an engine", () => {
  const teardown = new Teardown();
  let work: string;
  /** Where the final image's `/` is laid out. */
  let image: string;
  let env: Record<string, string>;

  /** Copies a stage's COPY instructions into `root` (its WORKDIR), `fromStage` giving --from dirs. */
  async function replayCopies(
    stage: Stage,
    root: string,
    fromStage: (name: string, path: string) => string,
  ) {
    for (const instruction of instructionsOf(stage, "COPY")) {
      const copy = parseCopy(instruction.args);
      const into = copy.sources.length > 1 || copy.destination.endsWith("/");
      for (const source of copy.sources) {
        const from =
          copy.from === undefined ? join(REPO_ROOT, source) : fromStage(copy.from, source);
        const to = join(root, copy.destination, into ? source.split("/").at(-1)! : "");
        await mkdir(dirname(to), { recursive: true });
        if (copy.from !== undefined && source.endsWith("node_modules")) await rename(from, to);
        else await cp(from, to, { recursive: true, verbatimSymlinks: true });
      }
    }
  }

  beforeAll(async () => {
    work = await makeWorkDir("image");
    teardown.add("work dir", () => removeWorkDir(work));
    image = join(work, "image");

    // The dependency stage: its COPYs, then its `npm ci --omit=dev`, verbatim.
    const deps = nodeModulesSource().stage;
    const depsRoot = join(work, "deps");
    await mkdir(depsRoot);
    await replayCopies(deps, depsRoot, () => {
      throw new Error("the dependency stage copies from no other stage");
    });
    const install = instructionsOf(deps, "RUN")[0]!.args.split(/\s+/);
    const startedAt = performance.now();
    // --prefer-offline: the suite's own npm ci has just filled npm's cache.
    await run(install[0]!, [...install.slice(1), "--prefer-offline"], { cwd: depsRoot });
    console.info(`production install took ${Math.round(performance.now() - startedAt)} ms`);

    // The final stage: --from=build paths are what `npm run build` made in this checkout.
    const workdir = /^\S+/.exec(instructionsOf(final, "WORKDIR")[0]!.args)![0];
    const appRoot = join(image, workdir);
    await replayCopies(final, appRoot, (name, path) =>
      name === deps.name
        ? join(depsRoot, path.replace(/^\/src\//, ""))
        : join(REPO_ROOT, path.replace(/^\/src\//, "")),
    );
    for (const runArgs of instructionsOf(final, "RUN").map((i) => i.args)) {
      for (const [, target, link] of runArgs.matchAll(/ln -s (\S+) (\S+)/g)) {
        await mkdir(dirname(join(image, link!)), { recursive: true });
        await symlink(join(image, target!), join(image, link!));
      }
    }
    env = { PATH: `${join(image, "usr/local/bin")}:${process.env.PATH}`, NODE_ENV: "production" };
  }, 240_000); // a cold npm cache downloads every production package
  afterAll(() => teardown.run());

  const launcher = () => join(image, "usr/local/bin/clawgate");
  const appRoot = () => join(image, "opt/clawgate");

  async function exitCode(command: string, args: string[], extraEnv: Record<string, string> = {}) {
    try {
      const { stdout } = await run(command, args, { env: { ...env, ...extraEnv } });
      return { code: 0, output: stdout };
    } catch (error) {
      const failed = error as { code?: number; stderr?: string };
      return { code: failed.code ?? -1, output: failed.stderr ?? "" };
    }
  }

  it("has no development packages in node_modules", async () => {
    const modules = join(appRoot(), "node_modules");
    const present: string[] = [];
    for (const name of DEV_ONLY) {
      const scope = dirname(name) === "." ? modules : join(modules, dirname(name));
      if ((await readdir(scope).catch((): string[] => [])).includes(name.split("/").at(-1)!))
        present.push(name);
    }
    expect(present).toEqual([]);
    const { stdout } = await run("du", ["-sk", modules]);
    console.info(`production node_modules: ${Math.round(Number.parseInt(stdout, 10) / 1024)} MB`);
  });

  it("runs each binary by its command: a bad flag exits 2 naming it, an unknown command exits 2", async () => {
    for (const command of ["control-plane", "data-plane", "clawctl"]) {
      const result = await exitCode(launcher(), [command, "--no-such-flag"]);
      expect(result, command).toMatchObject({
        code: 2,
        output: expect.stringContaining("--no-such-flag"),
      });
    }
    const help = await exitCode(launcher(), []);
    expect(help).toMatchObject({ code: 0, output: expect.stringContaining("control-plane") });
    const unknown = await exitCode(launcher(), ["proxy"]);
    expect(unknown).toMatchObject({
      code: 2,
      output: expect.stringContaining("unknown command 'proxy'"),
    });
  });

  for (const plane of ["data-plane", "control-plane"] as const) {
    it(`${plane}: healthy by the image's health check while up, stops cleanly on SIGTERM`, async () => {
      const [a, b, c] = await freePorts(3);
      const dir = join(work, plane);
      await mkdir(dir);
      const settings: Record<string, string> =
        plane === "data-plane"
          ? {
              CLAWGATE_PROXY_LISTEN: `127.0.0.1:${a}`,
              CLAWGATE_DP_ADMIN_LISTEN: `127.0.0.1:${b}`,
              // Nobody listens there: the data plane is alive, not ready, and /healthz says so.
              CLAWGATE_CP_ADDRESSES: `127.0.0.1:${c}`,
            }
          : { CLAWGATE_ADMIN_LISTEN: `127.0.0.1:${a}`, CLAWGATE_GRPC_LISTEN: `127.0.0.1:${b}` };
      // Both admin addresses go to the health check, as in the image, where both are set.
      const checkEnv = {
        CLAWGATE_DP_ADMIN_LISTEN: settings.CLAWGATE_DP_ADMIN_LISTEN ?? `127.0.0.1:${c}`,
        CLAWGATE_ADMIN_LISTEN: settings.CLAWGATE_ADMIN_LISTEN ?? `127.0.0.1:${c}`,
      };
      const healthcheck = () =>
        exitCode("node", [join(appRoot(), "deploy/docker/healthcheck.mjs")], checkEnv);

      expect((await healthcheck()).code, "nothing running yet").toBe(1);
      const proc = await ManagedProcess.spawn({
        name: plane,
        command: launcher(),
        args: [plane],
        cwd: dir,
        env: { ...env, ...settings },
      });
      teardown.add(plane, () => proc.kill());
      await waitFor(
        async () => {
          proc.assertRunning();
          return (await healthcheck()).code === 0;
        },
        {
          what: `${plane} healthy by the image's health check`,
          timeoutMs: 30_000,
          intervalMs: 200,
        },
      );
      // The launcher exec'd the binary: the PID we hold is node's, and it handles SIGTERM itself.
      process.kill(proc.pid, "SIGTERM");
      expect(await proc.exited).toEqual({ code: 0, signal: null });
      expect((await healthcheck()).code, "unhealthy once stopped").toBe(1);
    });
  }
});
