import type { CompiledRoute } from "../compiler/compiled-types.js";

/**
 * The path sent upstream: the matched prefix (or the whole exact path) replaced by
 * rewrite.pathPrefix, joined with exactly one "/" between the two parts; the query string
 * is kept as it came. Without a rewrite the path is forwarded as matched. `path` is the
 * normalized one (compiler/normalize-path.ts), so nothing after the prefix can climb out of the
 * rewritten prefix.
 */
export function upstreamPath(route: CompiledRoute, path: string, query: string): string {
  const replacement = route.rewritePathPrefix;
  if (replacement === undefined) return query === "" ? path : path + query;
  if (route.pathKind === "exact") return replacement + query;
  const rest = path.slice(route.pathValue.length);
  if (rest === "") return replacement + query;
  const replacementSlash = replacement.endsWith("/");
  const restSlash = rest.charCodeAt(0) === 47;
  if (replacementSlash && restSlash) return replacement + rest.slice(1) + query;
  if (!replacementSlash && !restSlash) return replacement + "/" + rest + query;
  return replacement + rest + query;
}
