import { describe, expect, it } from "vitest";
import { normalizePath, type PathRefusal } from "./normalize-path.js";

describe("normalizePath", () => {
  it.each<[string, string]>([
    // Already normal: returned as it came.
    ["/", "/"],
    ["/api", "/api"],
    ["/api/users/42", "/api/users/42"],
    ["/api/", "/api/"],
    ["/.well-known/openid", "/.well-known/openid"],
    ["/a/.hidden", "/a/.hidden"],
    ["/a/..b", "/a/..b"],
    ["/a/b..", "/a/b.."],
    ["/a/...", "/a/..."],
    ["/caf\u00e9", "/caf\u00e9"],
    // Dot-segments (RFC 3986 section 5.2.4).
    ["/a/./b/", "/a/b/"],
    ["/a/./b", "/a/b"],
    ["/a/b/../c", "/a/c"],
    ["/a/b/..", "/a/"],
    ["/a/b/.", "/a/b/"],
    ["/docs/../../admin/secret", "/admin/secret"],
    ["/..", "/"],
    ["/.", "/"],
    ["/../../..", "/"],
    ["/../a", "/a"],
    ["/a/../..", "/"],
    ["/a/b/c/./../../g", "/a/g"],
    // Merged slashes.
    ["//", "/"],
    ["/a//b", "/a/b"],
    ["///a///b///", "/a/b/"],
    ["/a/.//b", "/a/b"],
    ["//../a", "/a"],
    // Percent-encodings: unreserved decoded, the rest upper-cased.
    ["/%41", "/A"],
    ["/%7euser", "/~user"],
    ["/%2d%2E%5f%7E%30", "/-._~0"],
    ["/a%20b", "/a%20b"],
    ["/a%3fx", "/a%3Fx"],
    ["/%3b", "/%3B"],
    ["/%c3%a9", "/%C3%A9"],
    ["/%E2%82%AC/x", "/%E2%82%AC/x"],
    ["/%2e%2e/", "/"],
    ["/%2e%2e/admin", "/admin"],
    ["/a/%2E./b", "/b"],
    ["/a/.%2e/b", "/b"],
    ["/a/%2e/b", "/a/b"],
    ["/docs/%2e%2e/%2e%2e/admin/secret", "/admin/secret"],
    ["/a%2e%2e", "/a.."],
  ])("%s -> %s", (input, expected) => {
    expect(normalizePath(input)).toBe(expected);
  });

  it.each<[string, PathRefusal]>([
    ["/a/%2F", "encoded_slash"],
    ["/a%2fb", "encoded_slash"],
    ["/..%2F..%2Fetc/passwd", "encoded_slash"],
    ["/a/%5C", "backslash"],
    ["/a\\..\\b", "backslash"],
    ["/a\\b", "backslash"],
    ["/a%00b", "control_character"],
    ["/a\u0000b", "control_character"],
    ["/a\tb", "control_character"],
    ["/a%0d%0aSet-Cookie:x", "control_character"],
    ["/a%7f", "control_character"],
    ["/a\u007f", "control_character"],
    ["/%zz", "bad_percent_encoding"],
    ["/a%", "bad_percent_encoding"],
    ["/a%4", "bad_percent_encoding"],
    ["/a%4g/b", "bad_percent_encoding"],
    ["/%%32%65", "bad_percent_encoding"],
    ["/%c0%ae%c0%ae/admin", "bad_percent_encoding"],
    ["/%e0%80%ae", "bad_percent_encoding"],
    ["/%c3", "bad_percent_encoding"],
    ["/%80", "bad_percent_encoding"],
    ["/a/..;/b", "path_parameter"],
    ["/a/..;x=1/b", "path_parameter"],
    ["/a/.;/b", "path_parameter"],
    ["/a/%2e%2e;/b", "path_parameter"],
    ["/a/..%3b/b", "dot_segment_parameter"],
    ["/a/.%3B/b", "dot_segment_parameter"],
    ["/docs/..;/..;/admin", "path_parameter"],
    // Tomcat, Jetty and Spring strip ";..." from a segment: "/admin;x=1" is "/admin" there.
    ["/admin;x=1/secret", "path_parameter"],
    ["/admin;jsessionid=1", "path_parameter"],
    ["/a/b;v=1", "path_parameter"],
    ["/a%2e%2e/b;", "path_parameter"],
    // A fragment is no part of a request target; frameworks drop it, the route table would not.
    ["/admin#x", "fragment"],
    ["/admin/%41#x", "fragment"],
    ["/#", "fragment"],
    ["a/b", "not_absolute"],
    ["", "not_absolute"],
  ])("refuses %s (%s)", (input, reason) => {
    expect(normalizePath(input)).toEqual({ ok: false, reason });
  });

  it("returns the very string it got when nothing needs normalizing", () => {
    // The per-request fast path: no copy is made.
    const path = "/api/v1/users/42,v=1@x";
    expect(normalizePath(path)).toBe(path);
  });

  it("is idempotent: a normalized path normalizes to itself", () => {
    for (const input of ["/a/./b//c/../%7e%41/%c3%a9/", "/x/%2e%2e/%3f", "//a/b/.."]) {
      const once = normalizePath(input);
      expect(typeof once).toBe("string");
      expect(normalizePath(once as string)).toBe(once);
    }
  });
});
