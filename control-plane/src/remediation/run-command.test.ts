import { afterEach, describe, expect, it } from "vitest";
import { runCommand } from "./run-command.js";

/** Background processes a hook left running, killed after each test. */
const leftovers: number[] = [];
afterEach(() => {
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone already.
    }
  }
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pid a hook printed on stderr (`echo $! >&2`), found in the journaled evidence. */
function printedPid(evidence: string): number {
  const match = /stderr: (\d+)/.exec(evidence);
  expect(match, evidence).not.toBeNull();
  const pid = Number(match?.[1]);
  leftovers.push(pid);
  return pid;
}

// The result follows the hook's own exit, not the close of its stderr (review 20b H4).
describe("runCommand settles on the hook's exit", () => {
  it("a hook that starts a service in the background and exits 0 is ok, and the service lives", async () => {
    const result = await runCommand(["/bin/sh", "-c", "sleep 60 & echo $! >&2; exit 0"], {
      // Long enough that a runner waiting for stderr to close would report a timeout instead.
      timeoutMs: 3_000,
    });
    expect(result.outcome).toBe("ok");
    expect(result.evidence).toMatch(/^sh exited 0; stderr: \d+$/);
    // Only a real timeout kills the group: the service the hook started still runs.
    expect(alive(printedPid(result.evidence))).toBe(true);
  }, 20_000);

  it("a descendant that left the group (setsid) cannot hold a timed-out hook for ever", async () => {
    const result = await runCommand(["/bin/sh", "-c", "setsid sleep 60 & echo $! >&2; sleep 60"], {
      timeoutMs: 300,
      killGraceMs: 100,
    });
    expect(result.outcome).toBe("timeout");
    expect(result.evidence).toMatch(/sh still running after 300 ms, killed/);
    // It escaped the group kill, as setsid lets it: it is the operator's, the episode is not.
    expect(alive(printedPid(result.evidence))).toBe(true);
  }, 20_000);

  it("an abort (leadership lost) kills the hook's group and fails the attempt", async () => {
    const abort = new AbortController();
    const running = runCommand(["/bin/sh", "-c", "echo started >&2; sleep 60"], {
      timeoutMs: 600_000,
      killGraceMs: 100,
      signal: abort.signal,
    });
    abort.abort();
    const result = await running;
    expect(result.outcome).toBe("failed");
    expect(result.evidence).toMatch(/sh aborted \(leadership lost or stopping\), killed/);
  }, 20_000);

  it("strips CLAWGATE_* values a hook prints from the evidence the journal keeps", async () => {
    const result = await runCommand(
      ["/bin/sh", "-c", "echo 'found CLAWGATE_ADMIN_TOKEN=s3cret-value in the unit' >&2; exit 1"],
      { timeoutMs: 10_000 },
    );
    expect(result.outcome).toBe("failed");
    expect(result.evidence).toContain("CLAWGATE_ADMIN_TOKEN=[redacted] in the unit");
    expect(result.evidence).not.toContain("s3cret-value");
  }, 20_000);
});
