import type { HeaderTransform, Route } from "../gen/clawgate/v1/config_pb.js";
import { parseCidr } from "./cidr.js";
import { AUTH_MODES, isHeaderValue, transformHeaderProblem } from "./route-policy-rules.js";
import { isHeaderName, METHOD } from "./route-rules.js";

/**
 * The rules of routePolicyFields, applied to the wire route, fields named as in the document:
 * what a data plane refuses in a route's policies.
 */
export function routePolicyProblems(route: Route): { field: string; message: string }[] {
  const problems: { field: string; message: string }[] = [];
  const add = (field: string, message: string) => problems.push({ field, message });
  if (route.auth !== undefined && !(AUTH_MODES as readonly string[]).includes(route.auth.tenants)) {
    add("auth.tenants", `must be "required" or "optional", got "${route.auth.tenants}"`);
  }
  for (const [field, list] of [
    ["ipAllow", route.ipAllow],
    ["ipDeny", route.ipDeny],
  ] as const) {
    list.forEach((value, i) => {
      const parsed = parseCidr(value);
      if (!parsed.ok) add(`${field}.${i}`, parsed.reason);
    });
  }
  transformProblems("requestHeaders", "request", route.requestHeaders, add);
  transformProblems("responseHeaders", "response", route.responseHeaders, add);
  const cors = route.cors;
  if (cors !== undefined) {
    if (cors.allowOrigins.length === 0) add("cors.allowOrigins", "is empty");
    if (cors.allowCredentials && cors.allowOrigins.includes("*")) {
      add("cors.allowCredentials", 'cannot be true with allowOrigins "*"');
    }
    cors.allowMethods.forEach((method, i) => {
      if (!METHOD.test(method)) add(`cors.allowMethods.${i}`, "must be an upper-case method");
    });
    for (const field of ["allowHeaders", "exposeHeaders"] as const) {
      cors[field].forEach((name, i) => {
        if (!isHeaderName(name)) add(`cors.${field}.${i}`, "is not a header name");
      });
    }
  }
  if (route.maxBodyBytes > BigInt(Number.MAX_SAFE_INTEGER)) {
    add("maxBodyBytes", "is beyond 2^53");
  }
  return problems;
}

function transformProblems(
  field: string,
  side: "request" | "response",
  transform: HeaderTransform | undefined,
  add: (field: string, message: string) => void,
): void {
  if (transform === undefined) return;
  for (const [name, value] of Object.entries(transform.set)) {
    const problem = transformHeaderProblem(name, side);
    if (problem !== undefined) add(`${field}.set`, problem);
    else if (!isHeaderValue(value)) add(`${field}.set.${name}`, "holds a control character");
  }
  transform.remove.forEach((name, i) => {
    const problem = transformHeaderProblem(name, side);
    if (problem !== undefined) add(`${field}.remove.${i}`, problem);
  });
}
