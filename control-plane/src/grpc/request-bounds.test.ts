import {
  AckSchema,
  BreakerPhase,
  BreakerStateSchema,
  create,
  HelloSchema,
  NackSchema,
  NodeHealthSchema,
  STREAM_LIMITS,
} from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import {
  checkAnswer,
  checkBreakerReport,
  checkHello,
  checkNodes,
  healthCountOver,
  truncate,
} from "./request-bounds.js";

describe("checkHello", () => {
  const fields = [
    ["nodeId", STREAM_LIMITS.nodeIdLength],
    ["hostname", STREAM_LIMITS.hostnameLength],
    ["softwareVersion", STREAM_LIMITS.softwareVersionLength],
  ] as const;

  it.each(fields)("accepts Hello.%s at its limit of %i", (field, limit) => {
    const hello = create(HelloSchema, { nodeId: "dp", [field]: "a".repeat(limit) });
    expect(checkHello(hello)).toEqual({ ok: true, value: hello });
  });

  it.each(fields)("refuses Hello.%s one past its limit of %i, naming both", (field, limit) => {
    const hello = create(HelloSchema, { nodeId: "dp", [field]: "a".repeat(limit + 1) });
    expect(checkHello(hello)).toEqual({
      ok: false,
      reason: `Hello.${field} is ${limit + 1} characters long; the limit is ${limit}`,
    });
  });
});

describe("checkAnswer", () => {
  it("refuses a Nack whose nonce is over its bound", () => {
    const nack = create(NackSchema, { nonce: "n".repeat(STREAM_LIMITS.nonceLength + 1) });
    expect(checkAnswer("Nack", nack)).toMatchObject({ ok: false });
  });

  it("passes an Ack through unchanged", () => {
    const ack = create(AckSchema, { version: 3n, nonce: "cp-3" });
    expect(checkAnswer("Ack", ack)).toEqual({ ok: true, value: ack });
  });

  it("cuts a long Nack detail instead of refusing it", () => {
    const nack = create(NackSchema, { nonce: "cp-3", errorDetail: "d".repeat(1_000_000) });
    const result = checkAnswer("Nack", nack);
    if (!result.ok) throw new Error(result.reason);
    expect(result.value.errorDetail).toBe(
      `${"d".repeat(STREAM_LIMITS.nackDetailLength)}… [${1_000_000 - STREAM_LIMITS.nackDetailLength} more characters cut]`,
    );
  });
});

describe("truncate", () => {
  it("leaves text within the limit alone", () => {
    expect(truncate("abc", 3)).toBe("abc");
  });

  it("never splits a surrogate pair", () => {
    // "😀" is two UTF-16 code units; a cut after the first would leave a lone surrogate.
    expect(truncate("a😀b", 2)).toBe("a… [3 more characters cut]");
  });
});

describe("checkBreakerReport", () => {
  const breaker = (upstream: string, phase: BreakerPhase) =>
    create(BreakerStateSchema, { upstream, phase, sinceMs: 1_000n, cooldownUntilMs: 31_000n });

  it("reads each breaker's state, skipping a phase it does not know", () => {
    expect(
      checkBreakerReport([
        breaker("a", BreakerPhase.OPEN),
        breaker("b", BreakerPhase.HALF_OPEN),
        breaker("c", BreakerPhase.UNSPECIFIED),
      ]),
    ).toEqual({
      ok: true,
      value: [
        { upstream: "a", state: "open", sinceMs: 1_000, cooldownUntilMs: 31_000 },
        { upstream: "b", state: "half_open", sinceMs: 1_000, cooldownUntilMs: 31_000 },
      ],
    });
  });

  it("refuses an upstream name past its limit, naming the field", () => {
    const long = "a".repeat(STREAM_LIMITS.resourceNameLength + 1);
    expect(
      checkBreakerReport([breaker("a", BreakerPhase.OPEN), breaker(long, BreakerPhase.OPEN)]),
    ).toEqual({
      ok: false,
      reason: `BreakerReport.breakers[1].upstream is ${long.length} characters long; the limit is ${STREAM_LIMITS.resourceNameLength}`,
    });
  });

  it("refuses more breakers than the limit", () => {
    const many = Array.from({ length: STREAM_LIMITS.breakerStates + 1 }, () =>
      breaker("a", BreakerPhase.OPEN),
    );
    expect(checkBreakerReport(many)).toEqual({
      ok: false,
      reason: `BreakerReport.breakers has ${many.length} entries; the limit is ${STREAM_LIMITS.breakerStates}`,
    });
  });
});

describe("health report bounds", () => {
  const node = (address: string, state = "evicted") =>
    create(NodeHealthSchema, { upstream: "agents", address, state, evidence: "e" });

  it("counts a changes-only report's nodes and removed together against the report bound", () => {
    const over = STREAM_LIMITS.healthNodes + 1;
    expect(healthCountOver(over, true)).toBe(
      `NodeHealthReport.nodes and .removed have ${over} entries; the limit is ${STREAM_LIMITS.healthNodes}`,
    );
    expect(healthCountOver(over, false)).toBe(
      `NodeHealthReport.nodes has ${over} entries; the limit is ${STREAM_LIMITS.healthNodes}`,
    );
    expect(healthCountOver(STREAM_LIMITS.healthNodes, true)).toBeUndefined();
  });

  it("names a node's field over its bound by its index in the whole report", () => {
    const long = "a".repeat(STREAM_LIMITS.healthAddressLength + 1);
    expect(checkNodes("removed", [node("10.0.0.1:80"), node(long, "")], 500)).toEqual({
      ok: false,
      reason: `NodeHealthReport.removed[501].address is ${long.length} characters long; the limit is ${STREAM_LIMITS.healthAddressLength}`,
    });
    expect(checkNodes("nodes", [node("10.0.0.1:80")])).toEqual({
      ok: true,
      value: [
        {
          upstream: "agents",
          address: "10.0.0.1:80",
          state: "evicted",
          evidence: "e",
          changedAtMs: 0n,
        },
      ],
    });
  });
});
