import { describe, expect, it } from "vitest";
import { isRequestPath, MAX_REQUEST_PATH_LENGTH, requestPathProblem } from "./origin-form.js";

describe("requestPathProblem", () => {
  it.each([
    ["/", {}],
    ["/healthz", {}],
    ["/a/b-c_d.e~f/!$&'()*+,;=:@", {}],
    ["/caf%C3%A9", {}],
    ["/status?deep=1&x=/y?z", { query: true }],
    ["/status?", { query: true }],
  ])("accepts %s", (value, rules) => {
    expect(requestPathProblem(value, rules)).toBeUndefined();
    expect(isRequestPath(value, rules)).toBe(true);
  });

  it.each([
    ["", {}, 'must start with "/"'],
    ["healthz", {}, 'must start with "/"'],
    ["http://x/healthz", {}, 'must start with "/"'],
    ["/health z", {}, "has a space at 7; percent-encode it"],
    ["/h\r\nX: 1", {}, "has a control character (U+000D) at 2; percent-encode it"],
    ["/h\nX", {}, "has a control character (U+000A) at 2; percent-encode it"],
    ["/h\u0000", {}, "has a control character (U+0000) at 2; percent-encode it"],
    ["/h\u007f", {}, "has a control character (U+007F) at 2; percent-encode it"],
    ["/h\tx", {}, "has a control character (U+0009) at 2; percent-encode it"],
    ["/caf\u00e9", {}, "has a non-ASCII character (U+00E9) at 4; percent-encode it"],
    ["/a\u{1F600}", {}, "has a non-ASCII character (U+1F600) at 2; percent-encode it"],
    ["/a#b", {}, 'has "#" at 2; percent-encode it'],
    ["/a%2", {}, 'has a "%" at 2 not followed by two hex digits'],
    ["/a%zz", {}, 'has a "%" at 2 not followed by two hex digits'],
    ["/a?b", {}, 'has a "?" at 2; a query is not allowed here'],
    ["/a?b c", { query: true }, "has a space at 4 (in the query); percent-encode it"],
    ["/a\\b", {}, 'has "\\" at 2; percent-encode it'],
  ])("refuses %j", (value, rules, reason) => {
    expect(requestPathProblem(value, rules)).toBe(reason);
    expect(isRequestPath(value, rules)).toBe(false);
  });

  it("bounds the length", () => {
    const longest = `/${"a".repeat(MAX_REQUEST_PATH_LENGTH - 1)}`;
    expect(requestPathProblem(longest)).toBeUndefined();
    expect(requestPathProblem(`${longest}a`)).toBe(
      `is ${MAX_REQUEST_PATH_LENGTH + 1} characters long; at most ${MAX_REQUEST_PATH_LENGTH}`,
    );
  });
});
