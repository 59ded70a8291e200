import { stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  CLAWCTL_BIN,
  freePorts,
  ManagedProcess,
  makeWorkDir,
  REPO_ROOT,
  removeWorkDir,
  Teardown,
  waitFor,
} from "../support/index.js";

const LOCAL_GATEWAY = `${REPO_ROOT}e2e/dist/dev/local-gateway.js`;

describe("npm run dev, then the README's next step", () => {
  const teardown = new Teardown();
  afterAll(() => teardown.run());

  it("leaves clawctl working from the same directory with no token given", async () => {
    const dir = await makeWorkDir("dev");
    teardown.add("work dir", () => removeWorkDir(dir));
    const [proxy, dpAdmin, admin, grpc, demoA, demoB] = await freePorts(6);
    const adminListen = `127.0.0.1:${admin}`;
    const dev = await ManagedProcess.spawn({
      name: "dev",
      command: process.execPath,
      args: [LOCAL_GATEWAY],
      cwd: dir,
      env: {
        CLAWGATE_DEV_PROXY_LISTEN: `127.0.0.1:${proxy}`,
        CLAWGATE_DEV_DP_ADMIN_LISTEN: `127.0.0.1:${dpAdmin}`,
        CLAWGATE_DEV_ADMIN_LISTEN: adminListen,
        CLAWGATE_DEV_GRPC_LISTEN: `127.0.0.1:${grpc}`,
        CLAWGATE_DEV_DEMO_PORTS: `${demoA},${demoB}`,
      },
    });
    // Its own teardown stops the control plane, data plane and demo upstreams it started.
    teardown.add("dev", () => dev.stop(20_000));
    await waitFor(
      () => {
        dev.assertRunning();
        return dev.output.text(200).includes("Clawgate is running");
      },
      { what: "the dev gateway to say it is running", timeoutMs: 45_000 },
    );

    const tokenFile = join(dir, ".clawgate", "admin-token");
    expect((await stat(tokenFile)).mode & 0o777).toBe(0o600);
    expect(dev.output.text(200)).toContain("in .clawgate/admin-token (mode 0600)");
    expect(dev.output.text(200)).toContain(
      `CLAWGATE_ADMIN_URL=http://${adminListen} npx clawctl get routes`,
    );

    // The default admin URL is the dev default's; only the port moved.
    const clawctl = await ManagedProcess.spawn({
      name: "clawctl",
      command: process.execPath,
      args: [CLAWCTL_BIN, "get", "routes"],
      cwd: dir,
      env: { CLAWGATE_ADMIN_URL: `http://${adminListen}` },
    });
    teardown.add("clawctl", () => clawctl.stop());
    const exit = await clawctl.exited;
    expect(clawctl.output.text(), clawctl.tail()).toMatch(/^demo\s/m);
    expect(exit).toEqual({ code: 0, signal: null });

    expect(await dev.stop(20_000)).toEqual({ code: 0, signal: null });
  });
});
