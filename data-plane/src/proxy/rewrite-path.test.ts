import { describe, expect, it } from "vitest";
import type { CompiledRoute } from "../compiler/compiled-types.js";
import { upstreamPath } from "./rewrite-path.js";

function route(pathKind: "exact" | "prefix", pathValue: string, rewrite?: string) {
  return { pathKind, pathValue, rewritePathPrefix: rewrite } as CompiledRoute;
}

describe("upstreamPath", () => {
  it.each<[string, CompiledRoute, string, string, string]>([
    ["no rewrite keeps path and query", route("prefix", "/api"), "/api/x", "?a=1", "/api/x?a=1"],
    ["prefix replaced", route("prefix", "/api", "/v2"), "/api/users", "", "/v2/users"],
    ["prefix itself", route("prefix", "/api", "/v2"), "/api", "?q", "/v2?q"],
    ["rewrite to root", route("prefix", "/api", "/"), "/api/users", "", "/users"],
    ["root of rewrite to root", route("prefix", "/api", "/"), "/api", "", "/"],
    [
      "slash-ended prefix",
      route("prefix", "/static/", "/assets"),
      "/static/a.js",
      "",
      "/assets/a.js",
    ],
    [
      "both slash-ended",
      route("prefix", "/static/", "/assets/"),
      "/static/a.js",
      "",
      "/assets/a.js",
    ],
    [
      "exact path replaced",
      route("exact", "/login", "/auth/login"),
      "/login",
      "?x",
      "/auth/login?x",
    ],
  ])("%s", (_, r, path, query, expected) => {
    expect(upstreamPath(r, path, query)).toBe(expected);
  });
});
