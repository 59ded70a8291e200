import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { compileFor, policyRequest, run } from "../testing/policy-fixture.js";
import { bodyLimit } from "./body-limit.js";
import { BODY_TOO_LARGE, limitedBody } from "./limited-body.js";

describe("body-limit policy", () => {
  it("is not compiled for maxBodyBytes 0", () => {
    expect(compileFor(bodyLimit, {})).toBeUndefined();
  });

  it("answers 413 to a Content-Length above the limit, lets one at it through", () => {
    const policy = compileFor(bodyLimit, { maxBodyBytes: 100n });
    const request = (length: string) => policyRequest({ headers: { "content-length": length } });
    expect(run(policy, request("101"))).toEqual({
      kind: "error",
      code: "CLAWGATE_PAYLOAD_TOO_LARGE",
    });
    expect(run(policy, request("100"))).toBeUndefined();
    expect(run(policy, policyRequest())).toBeUndefined();
  });

  it("a streamed body passes chunk by chunk until one goes past the limit", async () => {
    const sent: number[] = [];
    const body = limitedBody(
      Readable.from([Buffer.alloc(60), Buffer.alloc(40), Buffer.alloc(1)]),
      100,
    );
    await expect(
      (async () => {
        for await (const chunk of body) sent.push(chunk.length);
      })(),
    ).rejects.toMatchObject({ code: BODY_TOO_LARGE });
    expect(sent).toEqual([60, 40]);
  });
});
