import { BreakerPolicySchema, create, TenantSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { unheldInWorkers } from "./unheld-in-workers.js";

const tenant = (fields: object) => create(TenantSchema, { name: "acme", ...fields });
const breaker = (fleetProbe: boolean) => create(BreakerPolicySchema, { name: "b", fleetProbe });

describe("unheldInWorkers", () => {
  it.each([
    ["requestsPerMinute", { requestsPerMinute: 20 }],
    ["tokensPerMinute", { tokensPerMinute: 100n }],
    ["tokensPerDay", { tokensPerDay: 1000n }],
  ])("refuses a tenant with %s, naming it", (_name, fields) => {
    const reason = unheldInWorkers({ tenants: [tenant(fields)], breakers: [] }, 4);
    expect(reason).toContain('tenant "acme"');
    expect(reason).toContain("workers=4");
  });

  it("refuses a fleetProbe breaker, and accepts tenants without limits and plain breakers", () => {
    expect(unheldInWorkers({ tenants: [], breakers: [breaker(true)] }, 2)).toContain('breaker "b"');
    expect(unheldInWorkers({ tenants: [tenant({})], breakers: [breaker(false)] }, 2)).toBe(
      undefined,
    );
  });
});
