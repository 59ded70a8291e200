import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONTROL_PLANE_BIN,
  freePorts,
  ManagedProcess,
  makeWorkDir,
  removeWorkDir,
  startControlPlane,
  Teardown,
} from "../support/index.js";

/** A PID that is certainly dead: a child we started and saw exit. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid as number;
}

describe("the embedded store file belongs to one control plane at a time", () => {
  const teardown = new Teardown();
  let dir: string;
  let storePath: string;

  beforeAll(async () => {
    dir = await makeWorkDir("store-lock");
    teardown.add("work dir", () => removeWorkDir(dir));
    storePath = join(dir, "store.json");
  });
  afterAll(() => teardown.run());

  it("refuses a second control plane on the file, naming the file and the holder", async () => {
    const first = await startControlPlane({ CLAWGATE_STORE_PATH: storePath }, { name: "cp-1" });
    teardown.add("cp-1", () => first.stop());
    await first.admin.putUpstream("agents", { nodes: [{ address: "127.0.0.1:9", weight: 1 }] });

    const [adminPort, grpcPort] = await freePorts(2);
    const second = await ManagedProcess.spawn({
      name: "cp-2",
      command: process.execPath,
      args: [CONTROL_PLANE_BIN],
      cwd: dir,
      env: {
        CLAWGATE_STORE_PATH: storePath,
        CLAWGATE_ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
        CLAWGATE_GRPC_LISTEN: `127.0.0.1:${grpcPort}`,
        CLAWGATE_ADMIN_TOKEN: "second-control-plane-token",
      },
    });
    teardown.add("cp-2", () => second.stop());
    expect(await second.exited).toEqual({ code: 1, signal: null });
    const said = second.output.text();
    expect(said).toContain(storePath);
    expect(said).toContain(`pid ${first.process.pid}`);
    expect(said).toContain(`host ${hostname()}`);
    expect(said).not.toContain("    at ");

    // The first one never noticed: its write is still there, and it keeps serving.
    expect((await first.admin.request("GET", "/v1/upstreams/agents")).status).toBe(200);

    // Once the first has stopped (SIGTERM), the file is free again, writes included.
    expect(await first.process.stop()).toEqual({ code: 0, signal: null });
    const third = await startControlPlane({ CLAWGATE_STORE_PATH: storePath }, { name: "cp-3" });
    teardown.add("cp-3", () => third.stop());
    expect((await third.admin.request("GET", "/v1/upstreams/agents")).status).toBe(200);
    await third.stop();
  });

  it("takes over a lock left by a process that died, and says so", async () => {
    const pid = await deadPid();
    const path = join(dir, "stale.json");
    await writeFile(
      `${path}.lock`,
      JSON.stringify({ pid, hostname: hostname(), startedAt: "2026-01-01T00:00:00.000Z" }),
    );
    const cp = await startControlPlane({ CLAWGATE_STORE_PATH: path }, { name: "cp-stale" });
    teardown.add("cp-stale", () => cp.stop());
    expect(cp.process.output.grep(`its holder (pid ${pid}) is no longer running`)).toHaveLength(1);
    const lock = JSON.parse(await readFile(`${path}.lock`, "utf8")) as { pid: number };
    expect(lock.pid).toBe(cp.process.pid);
    const put = await cp.admin.putUpstream("agents", {
      nodes: [{ address: "127.0.0.1:9", weight: 1 }],
    });
    expect(put.status).toBe(201);
  });
});
